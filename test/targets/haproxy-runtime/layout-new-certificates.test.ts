/**
 * A new certificate goes where the layout puts new certificates (issue 23): the configured crt-list file, with
 * the target's crt_list_options on its line (in the file and in memory); and where HAProxy loads no crt
 * directory or crt-list at all (a crt-store only layout), the operator step is reported with its code and the
 * exact line to add, and no reload is asked for (a reload would not load the file).
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { haproxyBinAndBuilds, haproxyBuilds } from "../../harness/haproxy-builds.js";
import { syncOnce as cycle, rig, servedSerial, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("new certificates CA");
});

// The line holds on every version: HAPROXY_BIN's and the LTS lines' (the matrix leaves this file out).
for (const build of haproxyBinAndBuilds(["3.2", "3.4"])) {
	describe(`HAProxy ${build.version}: new certificates in a crt-list file`, () => {
		it(`HAProxy ${build.version}: the line carries crt_list_options, in the file and in HAProxy's memory; served, and after a reload too`, async () => {
			const h = await r.haproxy({ bin: build.bin });
			const listDir = join(h.dir, "list");
			const t = r.runtime(h, {
				crt_dir: listDir,
				crt_list: h.crtListPath,
				crt_list_options: "[alpn h2,http/1.1] n.lay.test",
			});
			const leaf = await issueTestLeaf(ca, { names: ["n.lay.test"] });
			const e = await cycle(t, [desiredFromLeaf("n", leaf, ["n.lay.test"])], { expectOk: true });
			expect(writes(e)).toEqual(["storage-create n.pem", "crt-list-file-add n.pem", "runtime-add n.pem"]);
			expect(await readFile(h.crtListPath, "utf8")).toBe(`${listDir}/n.pem [alpn h2,http/1.1] n.lay.test\n`);
			expect(await h.command(`show ssl crt-list -n ${h.crtListPath}`)).toMatch(
				/n\.pem:\d+ \[alpn h2,http\/1\.1\S*\] n\.lay\.test/,
			);
			expect(await servedSerial(h, "n.lay.test")).toBe(leaf.serial);
		});
	});
}

describe("new certificates in a crt-list file (HAPROXY_BIN)", () => {
	it("crt_list_options that are not a crt-list line's options are refused naming the key", async () => {
		const h = await r.haproxy();
		expect(() => r.runtime(h, { crt_list: h.crtListPath, crt_list_options: "[alpn h2" })).toThrow(
			/crt_list_options/,
		);
	});
});

for (const build of haproxyBuilds(["3.2", "3.4"])) {
	describe(`HAProxy ${build.version}: a new certificate in a crt-store only layout`, () => {
		it(`HAProxy ${build.version}: NEW_CERTIFICATE_NEEDS_CONFIG with the load line to add; the file is complete, nothing in memory, no reload asked for`, async () => {
			const first = await issueTestLeaf(ca, { names: ["a.lay.test"] });
			const h = await r.haproxy({
				bin: build.bin,
				sections: `crt-store web\n    crt-base {dir}/D\n    key-base {dir}/D\n    load crt "a.crt" key "a.key" alias "site-a"`,
				bindExtra: `crt "@web/site-a"`,
				bindCrtDir: false,
				bindCrtList: false,
				files: { "D/a.crt": first.certPem + first.chainPem, "D/a.key": first.keyPem },
			});
			const D = join(h.dir, "D");
			const t = r.runtime(h, { crt_dir: D, crt_stores: { web: { crt_base: D, key_base: D } } });
			const leaf = await issueTestLeaf(ca, { names: ["n.lay.test"] });
			const want = [desiredFromLeaf("a", first, ["a.lay.test"]), desiredFromLeaf("n", leaf, ["n.lay.test"])];
			const e = await cycle(t, want, { expectOk: true });
			expect(writes(e)).toEqual(["storage-create n.pem"]);
			expect(e.notes.join("\n")).toContain(
				`n.pem: NEW_CERTIFICATE_NEEDS_CONFIG: written to ${D}/n.pem, but HAProxy loads no crt directory or crt-list that makes it live: add load crt "${D}/n.pem" alias "n" in crt-store web, and crt "@web/n" on the bind line, then reload`,
			);
			expect(await readFile(join(D, "n.pem"), "utf8")).toContain("PRIVATE KEY");
			expect(await h.command("show ssl cert")).not.toContain("n.pem");
			expect(existsSync(join(D, "a.pem"))).toBe(false);
			expect(writes(await cycle(t, want))).toEqual([]);
		});
	});
}
