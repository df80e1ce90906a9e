/**
 * `ssl-f-use crt D/b.crt key D/b.key` in a frontend (HAProxy 3.2+, issue 23): HAProxy names it by its crt path
 * and lists it in the frontend's implicit crt-list `@<frontend>`. certificatee renews b.crt and b.key in place,
 * as a pair, never a b.pem beside them, and never leaves b.key holding the old key.
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
	ca = await createTestCa("ssl-f-use CA");
});

for (const build of haproxyBuilds(["3.2", "3.4"])) {
	describe(`HAProxy ${build.version}: an ssl-f-use pair`, () => {
		it(`HAProxy ${build.version}: renewed in place three times, a reload between renewals; served each time, the key matches, no file created`, async () => {
			const names = ["b.lay.test", "www.b.lay.test"];
			const first = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				frontendLines: ["ssl-f-use crt {dir}/D/b.crt key {dir}/D/b.key"],
				// The bind carries no crt of its own: HAProxy 3.2.0 leaves ssl-f-use certificates Unused beside one.
				bindDefault: false,
				bindCrtDir: false,
				bindCrtList: false,
				files: { "D/b.crt": first.certPem + first.chainPem, "D/b.key": first.keyPem },
			});
			const D = join(h.dir, "D");
			expect(await h.command("show ssl crt-list")).toContain("@fe_tls");
			const t = r.runtime(h, { crt_dir: D });
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "b",
				names,
				files: { cert: join(D, "b.crt"), key: join(D, "b.key"), dirs: [D] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace b.crt", "runtime-set b.crt"]);
			expect((await readdir(D)).sort()).toEqual(["b.crt", "b.key"]);
		});
	});
}
