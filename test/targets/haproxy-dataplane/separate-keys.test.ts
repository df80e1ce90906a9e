/**
 * Certificates whose key is a separate file, through the Data Plane API behind the double, on the real builds of
 * the matrix (src/targets/haproxy-dataplane/front-uses.ts, separate-keys.ts):
 * - `ssl-f-use crt D/b.crt key D/b.key` (3.2+): the API's ssl_front_uses name both files, so the pair is renewed
 *   in place, the key file first (each holds the whole PEM: the storage takes nothing else), then the crt file,
 *   then HAProxy's memory by its crt path; no `b.pem` beside it, and a reload serves the renewal;
 * - `c.pem` + `c.pem.key` in a crt directory (any version): the API cannot address `c.pem.key` (it would reach
 *   `c_pem.key`), so the pair is the keeper in place, refused with what to do, its files untouched, and no
 *   create that can only answer 409 (2.6-3.0, where HAProxy's memory reads like any other).
 * The reload-safety invariant holds after each test (the rig).
 */
import { readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { HAPROXY_BIN } from "../../harness/haproxy.js";
import { haproxyBuilds, versionOf } from "../../harness/haproxy-builds.js";
import { rig, servedSerial, syncOnce } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";
import { renewThreeTimes } from "../haproxy-runtime/layout-scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("separate keys CA");
});

for (const build of haproxyBuilds(["3.2", "3.4"])) {
	describe(`targets/haproxy-dataplane, HAProxy ${build.version}: an ssl-f-use pair`, () => {
		it(`HAProxy ${build.version}: renewed in place three times, a reload between; served each time, the key matches, no file created (no b.pem)`, async () => {
			const names = ["b.sep.test"];
			const first = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				frontendLines: ["ssl-f-use crt {dir}/D/b.crt key {dir}/D/b.key"],
				bindDefault: false,
				bindCrtDir: false,
				bindCrtList: false,
				files: { "D/b.crt": first.certPem + first.chainPem, "D/b.key": first.keyPem },
			});
			const D = join(h.dir, "D");
			const d = await r.dpapi(h, { storageDir: D });
			const t = r.dataplane(h, d, { storage_dir: D });
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "b",
				names,
				keyInside: true,
				files: { cert: join(D, "b.crt"), key: join(D, "b.key"), dirs: [D] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace b.crt", "runtime-set b.crt"]);
			// The key file is written before the crt file: PUT b.key, then PUT b.crt, then HAProxy's memory.
			expect(
				d.requests
					.filter((q) => q.method === "put")
					.map((q) => `${q.operation} ${basename(decodeURIComponent(q.path))} ${q.status}`),
			).toEqual(
				Array.from({ length: 3 }, () => [
					"replaceStorageSSLCertificate b.key 200",
					"replaceStorageSSLCertificate b.crt 200",
					"replaceCert b.crt 200",
				]).flat(),
			);
			expect(d.scheduledReloads).toEqual([]);
		});
	});
}

const own = versionOf(HAPROXY_BIN);
const companionBuilds = [
	...haproxyBuilds(["2.8", "3.0", "3.2", "3.4"]),
	...(own?.startsWith("2.6") ? [{ version: own, bin: HAPROXY_BIN }] : []),
];
for (const build of companionBuilds) {
	describe(`targets/haproxy-dataplane, HAProxy ${build.version}: c.pem + c.pem.key in a crt directory`, () => {
		it(`HAProxy ${build.version}: the keeper in place, refused PLACEMENT_UNKNOWN with what to do, never written; no create answered 409`, async () => {
			const names = ["c.sep.test"];
			const first = await issueTestLeaf(ca, { names });
			const files = { "c.pem": first.certPem + first.chainPem, "c.pem.key": first.keyPem };
			const h = await r.haproxy({ bin: build.bin, crtDir: files });
			const t = r.dataplane(h, await r.dpapi(h));
			const renewed = await issueTestLeaf(ca, { names });
			for (let cycle = 1; cycle <= 2; cycle++) {
				const e = await syncOnce(t, [desiredFromLeaf("c", renewed, names)]);
				expect(e.ok, JSON.stringify(e.error)).toBe(true);
				expect(e.verdicts.find((v) => "ref" in v && v.ref === "c.pem")).toMatchObject({
					class: "refused",
					code: "PLACEMENT_UNKNOWN",
					why: expect.stringContaining(
						"(c.pem.key by HAProxy's ssl-load-extra-files, or c.key with ssl-load-extra-del-ext), which the Data Plane API does not name and cannot write or remove (it addresses c.pem.key as c_pem.key)",
					),
				});
				expect(e.steps.map((s) => `${s.op} ${s.ref}`)).toEqual([]);
			}
			expect((await readdir(h.crtDir)).sort()).toEqual(["c.pem", "c.pem.key"]);
			for (const [f, content] of Object.entries(files))
				expect(await readFile(join(h.crtDir, f), "utf8")).toBe(content);
			expect(await servedSerial(h, "c.sep.test")).toBe(first.serial);
		});
	});
}
