/**
 * The layouts every HAProxy version has (issue 23's done-when, docs/layouts.md): a combined PEM in a crt
 * directory and a combined PEM named by a crt-list file, through both target kinds (the runtime socket; the
 * Data Plane API double in front of the same HAProxy), on every version of the matrix this machine holds
 * (2.6 Debian, 2.8, 3.0, 3.2, 3.4). Each renews three times with a reload between renewals: served before and
 * after each reload, the file holds the renewal with its key, no file created, a second cycle writes nothing,
 * and the reload-safety invariant (`haproxy -c`, a reload, every name probed) after every renewal.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { BuiltTarget } from "../../../../src/targets/registry.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../../harness/certs.js";
import type { Haproxy } from "../../../harness/haproxy.js";
import { haproxyBuilds } from "../../../harness/haproxy-builds.js";
import { type Rig, rig } from "../../../harness/targets.js";
import { renewThreeTimes } from "../../haproxy-runtime/layout-scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("classic layouts CA");
});

type Kind = "haproxy-runtime" | "haproxy-dataplane";

/** A target of `kind` whose certificate files are in `dir`. */
async function targetOn(rg: Rig, h: Haproxy, kind: Kind, dir: string): Promise<BuiltTarget> {
	if (kind === "haproxy-runtime") return rg.runtime(h, { crt_dir: dir });
	return rg.dataplane(h, await rg.dpapi(h, { storageDir: dir }), { storage_dir: dir });
}

for (const build of haproxyBuilds(["2.6", "2.8", "3.0", "3.2", "3.4"])) {
	for (const kind of ["haproxy-runtime", "haproxy-dataplane"] as const) {
		describe(`HAProxy ${build.version}, ${kind}: the classic layouts`, () => {
			it(`HAProxy ${build.version}, ${kind}: a combined PEM in a crt directory renewed three times, a reload between renewals; served each time, the key inside matches, no file created`, async () => {
				const names = ["dir.classic.test", "www.dir.classic.test"];
				const first = await issueTestLeaf(ca, { names });
				const h = await r.haproxy({ bin: build.bin, crtDir: { "dir.pem": first.combinedPem } });
				const t = await targetOn(r, h, kind, h.crtDir);
				const file = join(h.crtDir, "dir.pem");
				const perCycle = await renewThreeTimes({
					h,
					t,
					ca,
					name: "dir",
					names,
					files: { cert: file, key: file, dirs: [h.crtDir] },
					keyInside: true,
				});
				for (const w of perCycle) expect(w).toEqual(["storage-replace dir.pem", "runtime-set dir.pem"]);
			});

			it(`HAProxy ${build.version}, ${kind}: a combined PEM a crt-list file names renewed three times, a reload between renewals; served each time, the line kept, no file created`, async () => {
				const names = ["list.classic.test"];
				const first = await issueTestLeaf(ca, { names });
				const h = await r.haproxy({
					bin: build.bin,
					crtList: [{ file: "list.pem", pem: first.combinedPem, sslOptions: "alpn h2", filters: names }],
				});
				const listDir = join(h.dir, "list");
				const lines = await readFile(h.crtListPath, "utf8");
				const t = await targetOn(r, h, kind, listDir);
				const file = join(listDir, "list.pem");
				const perCycle = await renewThreeTimes({
					h,
					t,
					ca,
					name: "list",
					names,
					files: { cert: file, key: file, dirs: [listDir, h.dir] },
					keyInside: true,
				});
				for (const w of perCycle) expect(w).toEqual(["storage-replace list.pem", "runtime-set list.pem"]);
				expect(await readFile(h.crtListPath, "utf8")).toBe(lines);
			});
		});
	}
}
