/**
 * Certificates whose key is a separate file through the Data Plane API, HAProxy 3.2 and 3.4 behind the double
 * (src/targets/haproxy-dataplane/separate-keys.ts): an `ssl-f-use crt D/b.crt key D/b.key` line, and `c.pem` +
 * `c.pem.key` in a crt directory. The API names neither key file, so the target never writes them, and never
 * makes a second file beside them (the canonical `b.pem`, which nothing loads) nor sends a create that can only
 * answer 409: each is the keeper in place, reported PLACEMENT_UNKNOWN with what to do, its files untouched, the
 * old certificate still served, and the reload-safety invariant holds (the rig).
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { EndpointReport } from "../../../src/reconcile/report.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../harness/certs.js";
import type { Haproxy } from "../../harness/haproxy.js";
import { haproxyBuilds } from "../../harness/haproxy-builds.js";
import { rig, servedSerial, syncOnce } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("separate keys CA");
});

/** The renewal of `name` through the API leaves `files` (in `dir`) and the served certificate as they were. */
async function leftAlone(o: {
	h: Haproxy;
	e: EndpointReport;
	ref: string;
	dir: string;
	files: Record<string, string>;
	first: TestLeaf;
	sni: string;
}) {
	const { e } = o;
	expect(e.ok, JSON.stringify(e.error)).toBe(true);
	expect(e.verdicts.find((v) => "ref" in v && v.ref === o.ref)).toMatchObject({
		class: "refused",
		code: "PLACEMENT_UNKNOWN",
		why: expect.stringContaining("has its key in a separate file"),
	});
	expect(e.steps.map((s) => `${s.op} ${s.ref}`)).toEqual([]);
	expect((await readdir(o.dir)).sort()).toEqual(Object.keys(o.files).sort());
	for (const [f, content] of Object.entries(o.files))
		expect(await readFile(join(o.dir, f), "utf8")).toBe(content);
	expect(await servedSerial(o.h, o.sni)).toBe(o.first.serial);
}

for (const build of haproxyBuilds(["3.2", "3.4"])) {
	describe(`targets/haproxy-dataplane, HAProxy ${build.version}: a key in a separate file`, () => {
		it(`HAProxy ${build.version}: an ssl-f-use pair is the keeper in place, reported PLACEMENT_UNKNOWN, never written; no b.pem beside it`, async () => {
			const names = ["b.sep.test"];
			const first = await issueTestLeaf(ca, { names });
			const files = { "b.crt": first.certPem + first.chainPem, "b.key": first.keyPem };
			const h = await r.haproxy({
				bin: build.bin,
				frontendLines: ["ssl-f-use crt {dir}/D/b.crt key {dir}/D/b.key"],
				bindDefault: false,
				bindCrtDir: false,
				bindCrtList: false,
				files: { "D/b.crt": files["b.crt"], "D/b.key": files["b.key"] },
			});
			const D = join(h.dir, "D");
			const t = r.dataplane(h, await r.dpapi(h, { storageDir: D }), { storage_dir: D });
			const renewed = await issueTestLeaf(ca, { names });
			for (let cycle = 1; cycle <= 2; cycle++) {
				const e = await syncOnce(t, [desiredFromLeaf("b", renewed, names)]);
				await leftAlone({ h, e, ref: "b.crt", dir: D, files, first, sni: "b.sep.test" });
			}
		});

		it(`HAProxy ${build.version}: c.pem + c.pem.key in a crt directory is the keeper in place, reported PLACEMENT_UNKNOWN, never written; no create answered 409`, async () => {
			const names = ["c.sep.test"];
			const first = await issueTestLeaf(ca, { names });
			const files = { "c.pem": first.certPem + first.chainPem, "c.pem.key": first.keyPem };
			const h = await r.haproxy({ bin: build.bin, crtDir: files });
			const t = r.dataplane(h, await r.dpapi(h));
			const renewed = await issueTestLeaf(ca, { names });
			const e = await syncOnce(t, [desiredFromLeaf("c", renewed, names)]);
			await leftAlone({ h, e, ref: "c.pem", dir: h.crtDir, files, first, sni: "c.sep.test" });
		});
	});
}
