/**
 * `ssl-load-extra-del-ext` (global): HAProxy loads a keyless `site.crt` with `site.key` (the `.crt` extension
 * removed before `.key` is added), not `site.crt.key`; every version of the matrix accepts the keyword (2.6.12,
 * 2.8.0, 3.0.0, 3.2.0 and 3.4.0 load `site.crt` + `site.key` with it and refuse `site.crt` without a key
 * without it). 3.2+ print that key file (`Key filename`): before 3.2 placement learns the keyword from
 * haproxy_config, never from the file names beside `site.crt`. certificatee renews the pair in place (issue 23).
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import type { Haproxy } from "../../harness/haproxy.js";
import { haproxyBuilds } from "../../harness/haproxy-builds.js";
import { syncOnce as cycle, rig, servedSerial, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";
import { renewThreeTimes } from "./layout-scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("del-ext CA");
});

async function delExtHaproxy(bin: string, names: string[]): Promise<Haproxy> {
	const first = await issueTestLeaf(ca, { names });
	return r.haproxy({
		bin,
		globalLines: ["ssl-load-extra-del-ext"],
		crtDir: { "site.crt": first.certPem + first.chainPem, "site.key": first.keyPem },
	});
}

for (const build of haproxyBuilds(["2.6", "2.8", "3.0", "3.2", "3.4"])) {
	const printsKeyFile = build.version.startsWith("3.4.") || build.version.startsWith("3.2.");
	describe(`HAProxy ${build.version}: site.crt + site.key with ssl-load-extra-del-ext`, () => {
		it(`HAProxy ${build.version}: with haproxy_config, renewed as a pair three times, a reload between renewals; served each time, the key matches, no file created`, async () => {
			const names = ["site.lay.test"];
			const h = await delExtHaproxy(build.bin, names);
			const t = r.runtime(h, { haproxy_config: h.configPath });
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "site",
				names,
				files: { cert: join(h.crtDir, "site.crt"), key: join(h.crtDir, "site.key"), dirs: [h.crtDir] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace site.crt", "runtime-set site.crt"]);
			expect((await readdir(h.crtDir)).sort()).toEqual(["site.crt", "site.key"]);
		});

		it(`HAProxy ${build.version}: without haproxy_config ${printsKeyFile ? "placed from Key filename (3.2+ prints site.key) and renewed as a pair" : "the pair is PLACEMENT_UNKNOWN (this version prints no key file, and file names alone never decide) and never written"}`, async () => {
			const names = ["site.lay.test"];
			const h = await delExtHaproxy(build.bin, names);
			const t = r.runtime(h);
			if (printsKeyFile) {
				const perCycle = await renewThreeTimes({
					h,
					t,
					ca,
					name: "site",
					names,
					files: { cert: join(h.crtDir, "site.crt"), key: join(h.crtDir, "site.key"), dirs: [h.crtDir] },
				});
				for (const w of perCycle) expect(w).toEqual(["storage-replace site.crt", "runtime-set site.crt"]);
				return;
			}
			const before = await readFile(join(h.crtDir, "site.crt"), "utf8");
			const e = await cycle(t, [desiredFromLeaf("site", await issueTestLeaf(ca, { names }), names)], {
				expectOk: true,
			});
			expect(writes(e)).toEqual([]);
			expect(e.verdicts).toContainEqual(
				expect.objectContaining({
					class: "refused",
					ref: "site.crt",
					code: "PLACEMENT_UNKNOWN",
					why: expect.stringContaining("ssl-load-extra-del-ext"),
				}),
			);
			expect(await readFile(join(h.crtDir, "site.crt"), "utf8")).toBe(before);
			expect((await readdir(h.crtDir)).sort()).toEqual(["site.crt", "site.key"]);
		});

		it(`HAProxy ${build.version}: a haproxy_config that cannot be read ${printsKeyFile ? "does not stop the pair Key filename places" : "refuses the pair that depends on it (HAPROXY_CONFIG_INVALID, naming the file)"}; a combined PEM beside it is renewed as ever`, async () => {
			const names = ["site.lay.test"];
			const other = ["other.lay.test"];
			const firstSite = await issueTestLeaf(ca, { names });
			const firstOther = await issueTestLeaf(ca, { names: other });
			const h = await r.haproxy({
				bin: build.bin,
				globalLines: ["ssl-load-extra-del-ext"],
				crtDir: {
					"site.crt": firstSite.certPem + firstSite.chainPem,
					"site.key": firstSite.keyPem,
					"other.pem": firstOther.combinedPem,
				},
			});
			const missing = join(h.dir, "missing.cfg");
			const t = r.runtime(h, { haproxy_config: missing });
			const next = await issueTestLeaf(ca, { names: other });
			const e = await cycle(
				t,
				[
					desiredFromLeaf("site", await issueTestLeaf(ca, { names }), names),
					desiredFromLeaf("other", next, other),
				],
				{ expectOk: true },
			);
			if (printsKeyFile) {
				// 3.2+ print site.key as its Key filename: the running HAProxy says it without the configuration.
				expect(writes(e).sort()).toEqual([
					"runtime-set other.pem",
					"runtime-set site.crt",
					"storage-replace other.pem",
					"storage-replace site.crt",
				]);
				expect(await servedSerial(h, "other.lay.test")).toBe(next.serial);
				return;
			}
			expect(writes(e)).toEqual(["storage-replace other.pem", "runtime-set other.pem"]);
			expect(e.verdicts).toContainEqual(
				expect.objectContaining({
					class: "refused",
					ref: "site.crt",
					code: "HAPROXY_CONFIG_INVALID",
					why: expect.stringContaining(missing),
				}),
			);
			expect(await readFile(join(h.crtDir, "site.crt"), "utf8")).toBe(firstSite.certPem + firstSite.chainPem);
			expect(await servedSerial(h, "other.lay.test")).toBe(next.serial);
		});
	});
}
