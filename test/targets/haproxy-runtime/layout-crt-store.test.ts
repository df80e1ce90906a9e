/**
 * A crt-store with separate files (`load crt "a.crt" key "a.key" alias "site-a"`, bound as `crt "@web/site-a"`),
 * HAProxy 3.2 and 3.4 (issue 23). HAProxy's `key` argument overrides a key inside the crt file, so writing a
 * combined PEM into a.crt while a.key keeps the old key takes the name down at the next reload. certificatee
 * renews the store's own files in place, as a pair, and its runtime entry by its name `@web/site-a`.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { haproxyBuilds } from "../../harness/haproxy-builds.js";
import { rig } from "../../harness/targets.js";
import { renewThreeTimes } from "./layout-scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("crt-store CA");
});

const STORE = `crt-store web
    crt-base {dir}/D
    key-base {dir}/D
    load crt "a.crt" key "a.key" alias "site-a"`;

for (const build of haproxyBuilds(["3.2", "3.4"])) {
	describe(`HAProxy ${build.version}: a crt-store pair`, () => {
		it(`HAProxy ${build.version}: renewed in place three times, a reload between renewals; served each time, the key matches, no file created`, async () => {
			const names = ["a.lay.test"];
			const first = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				sections: STORE,
				bindExtra: `crt "@web/site-a"`,
				bindCrtDir: false,
				bindCrtList: false,
				files: { "D/a.crt": first.certPem + first.chainPem, "D/a.key": first.keyPem },
			});
			const D = join(h.dir, "D");
			const t = r.runtime(h, { crt_dir: D, crt_stores: { web: { crt_base: D, key_base: D } } });
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "a",
				names,
				files: { cert: join(D, "a.crt"), key: join(D, "a.key"), dirs: [D] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace @web/site-a", "runtime-set @web/site-a"]);
			expect((await readdir(D)).sort()).toEqual(["a.crt", "a.key"]);
		});
	});
}
