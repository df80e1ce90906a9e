/**
 * A crt directory holding `c.pem` (leaf and chain, no key) and `c.pem.key` (HAProxy's `ssl-load-extra-files`
 * companion), on every version it exists on (issue 23). certificatee keeps the layout: c.pem gets the new leaf
 * and chain, c.pem.key the new key, renamed in an order whose every state loads. A `.key` left beside a
 * combined PEM (what an older certificatee wrote) is removed with the next write: never a private key on disk
 * that matches no certificate.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { haproxyBuilds } from "../../harness/haproxy-builds.js";
import { syncOnce as cycle, rig, servedSerial, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";
import { renewThreeTimes } from "./layout-scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("pem.key CA");
});

for (const build of haproxyBuilds(["2.6", "2.8", "3.0", "3.2", "3.4"])) {
	describe(`HAProxy ${build.version}: c.pem + c.pem.key in a crt directory`, () => {
		it(`HAProxy ${build.version}: renewed as a pair three times, a reload between renewals; served each time, the key matches, no file created`, async () => {
			const names = ["c.lay.test"];
			const first = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				crtDir: { "c.pem": first.certPem + first.chainPem, "c.pem.key": first.keyPem },
			});
			const t = r.runtime(h);
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "c",
				names,
				files: { cert: join(h.crtDir, "c.pem"), key: join(h.crtDir, "c.pem.key"), dirs: [h.crtDir] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace c.pem", "runtime-set c.pem"]);
		});

		it(`HAProxy ${build.version}: a crt directory haproxy.cfg spells relative (crt_dir_name; 3.2+ prints that spelling as Crt filename) is renewed in place`, async () => {
			const names = ["rel.lay.test"];
			const old = await issueTestLeaf(ca, { names });
			const now = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				crtDir: { "rel.pem": old.combinedPem },
				bindCrtDir: false,
				bindExtra: "crt certs",
			});
			const t = r.runtime(h, { crt_dir_name: "certs" });
			const e = await cycle(t, [desiredFromLeaf("rel", now, names)], { expectOk: true });
			expect(writes(e)).toEqual(["storage-replace rel.pem", "runtime-set rel.pem"]);
			expect(await servedSerial(h, "rel.lay.test")).toBe(now.serial);
		});

		it(`HAProxy ${build.version}: a .key left beside a combined PEM, holding another key, goes with the next write`, async () => {
			const names = ["s.lay.test"];
			const old = await issueTestLeaf(ca, { names });
			const now = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				crtDir: { "s.pem": now.combinedPem, "s.pem.key": old.keyPem },
			});
			const t = r.runtime(h);
			const e = await cycle(t, [desiredFromLeaf("s", now, names)], { expectOk: true });
			expect(writes(e)).toEqual(["storage-replace s.pem"]);
			expect(existsSync(join(h.crtDir, "s.pem.key"))).toBe(false);
			expect(await servedSerial(h, "s.lay.test")).toBe(now.serial);
			expect(writes(await cycle(t, [desiredFromLeaf("s", now, names)]))).toEqual([]);
		});
	});
}
