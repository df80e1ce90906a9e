/**
 * Never downgrade on a real HAProxy, through both HAProxy kinds (the runtime socket, and the Data Plane API
 * double in front of the same HAProxy): with the option on (the engine sets it in
 * cluster mode), a certificate older than the live one is not pushed, and HAProxy keeps serving the newer
 * one; with it off (the default), the same push goes through. Served is the truth: a TLS probe by SNI.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial as normal } from "../../../../src/certificates/names.js";
import { endpointFailures } from "../../../../src/reconcile/failures.js";
import type { TargetDeps } from "../../../../src/targets/types.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../../harness/certs.js";
import { rig, servedSerial, syncOnce, okWrites as writes } from "../../../harness/targets.js";
import { desiredFromLeaf } from "../../../reconcile/scenario.js";

const DAY = 86_400_000;
const names = ["downgrade.test"];
let ca: TestIssuer;
let older: TestLeaf;
let newer: TestLeaf;
const r = rig({ reloadSafe: true });

beforeAll(async () => {
	ca = await createTestCa("never-downgrade CA");
	older = await issueTestLeaf(ca, { names, notAfter: new Date(Date.now() + 30 * DAY) });
	newer = await issueTestLeaf(ca, { names, notAfter: new Date(Date.now() + 60 * DAY) });
});

describe("never downgrade on a real HAProxy", () => {
	it.each(["haproxy-runtime", "haproxy-dataplane"] as const)(
		"%s: option on: the older certificate is refused and the newer one stays served; option off: it is pushed",
		async (kind) => {
			const h = await r.haproxy({ crtDir: { "downgrade.pem": newer.combinedPem } });
			const d = kind === "haproxy-dataplane" ? await r.dpapi(h) : undefined;
			const target = (extra: Partial<TargetDeps> = {}) =>
				d === undefined ? r.runtime(h, {}, extra) : r.dataplane(h, d, {}, extra);
			const pid = await h.workerPid();
			const want = [desiredFromLeaf("downgrade", older, names)];
			expect(await servedSerial(h, "downgrade.test")).toBe(normal(newer.serial));

			const guarded = target({ neverDowngrade: true });
			for (let cycle = 0; cycle < 2; cycle++) {
				const e = await syncOnce(guarded, want, { expectOk: true });
				expect(writes(e)).toEqual([]);
				expect(e.verdicts).toContainEqual(
					expect.objectContaining({ class: "refused", ref: "downgrade.pem", code: "UPDATE_WOULD_DOWNGRADE" }),
				);
				expect(endpointFailures(e).map((f) => f.code)).toContain("UPDATE_WOULD_DOWNGRADE");
				expect(await servedSerial(h, "downgrade.test")).toBe(normal(newer.serial));
			}

			const plain = target();
			const e = await syncOnce(plain, want, { expectOk: true });
			expect(writes(e)).toEqual(["storage-replace downgrade.pem", "runtime-set downgrade.pem"]);
			expect(await servedSerial(h, "downgrade.test")).toBe(normal(older.serial));

			// The option never holds back a renewal: the newer certificate goes out again with it on.
			const renewed = await syncOnce(guarded, [desiredFromLeaf("downgrade", newer, names)], {
				expectOk: true,
			});
			expect(writes(renewed)).toEqual(["storage-replace downgrade.pem", "runtime-set downgrade.pem"]);
			expect(await servedSerial(h, "downgrade.test")).toBe(normal(newer.serial));
			expect(await h.workerPid()).toBe(pid);
		},
	);
});
