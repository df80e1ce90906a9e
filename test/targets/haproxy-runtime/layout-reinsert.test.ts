/**
 * `runtime-reinsert` of a ref with a separate key file (issue 23, docs/layouts.md "direct crt line" row): a
 * keeper in crt_dir shares a name with another certificate HAProxy loads from a crt-store (`@web/other`) or an
 * `ssl-f-use` line, the keeper serves that name, and its renewal (`commit ssl cert`) would put its SNI entries
 * behind the other's. The engine commits the other ref again with its own content, read where it lives (its
 * certificate file and its key file, from its placement), so the keeper keeps serving; that ref's files are
 * never written. Then `haproxy -c`, a reload and the probes agree (the rig's invariant).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { haproxyBuilds } from "../../harness/haproxy-builds.js";
import { assertReloadSafe } from "../../harness/invariant.js";
import { syncOnce as cycle, rig, servedSerial, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("reinsert CA");
});

const KEEPER = ["shared.lay.test", "k.lay.test"];
const OTHER = ["shared.lay.test"];

const layouts = [
	{
		layout: "a crt-store load (crt + key)",
		lines: ["3.2", "3.4"],
		ref: "@web/other",
		options: (dir: string) => ({
			sections: `crt-store web\n    crt-base ${dir}/E\n    key-base ${dir}/E\n    load crt "o.crt" key "o.key" alias "other"`,
			bindExtra: `crt "@web/other"`,
		}),
		overrides: (dir: string) => ({
			crt_stores: { web: { crt_base: join(dir, "E"), key_base: join(dir, "E") } },
		}),
	},
	{
		// 3.2.0 leaves ssl-f-use certificates Unused on a bind with its own crt; 3.4 serves them beside it.
		layout: "an ssl-f-use line (crt + key)",
		lines: ["3.4"],
		ref: "{dir}/E/o.crt",
		options: () => ({ frontendLines: ["ssl-f-use crt {dir}/E/o.crt key {dir}/E/o.key"] }),
		overrides: () => ({}),
	},
] as const;

for (const l of layouts) {
	for (const build of haproxyBuilds(l.lines)) {
		describe(`HAProxy ${build.version}: runtime-reinsert of ${l.layout}`, () => {
			it(`HAProxy ${build.version}: the keeper's renewal stays served for the shared name: ${l.layout} is committed again from its own crt and key files, never written; served after a reload`, async () => {
				const [k1, other] = await Promise.all([
					issueTestLeaf(ca, { names: KEEPER }),
					issueTestLeaf(ca, { names: OTHER }),
				]);
				// The temp dir is known once HAProxy starts; `{dir}` in the options is replaced by the harness.
				const h = await r.haproxy({
					bin: build.bin,
					crtDir: { "k.pem": k1.combinedPem },
					...l.options("{dir}"),
					files: { "E/o.crt": other.certPem + other.chainPem, "E/o.key": other.keyPem },
				});
				const ref = l.ref.replace("{dir}", h.dir);
				expect(await h.command("show ssl cert")).toContain(ref);
				// The crt directory comes first on the bind: the keeper serves the shared name.
				expect(await servedSerial(h, "shared.lay.test")).toBe(k1.serial);
				const t = r.runtime(h, l.overrides(h.dir));
				const k2 = await issueTestLeaf(ca, { names: KEEPER });
				const e = await cycle(t, [desiredFromLeaf("k", k2, KEEPER)], { expectOk: true });
				expect(
					e.steps.map((s) => `${s.op} ${s.ref} ${s.result}${s.error ? ` ${s.error.message}` : ""}`),
				).toEqual(["storage-replace k.pem ok", "runtime-set k.pem ok", `runtime-reinsert ${ref} ok`]);
				for (const sni of KEEPER) expect(await servedSerial(h, sni), sni).toBe(k2.serial);
				// The other ref's files are read, never written.
				expect(await readFile(join(h.dir, "E/o.crt"), "utf8")).toBe(other.certPem + other.chainPem);
				expect(await readFile(join(h.dir, "E/o.key"), "utf8")).toBe(other.keyPem);
				expect(writes(await cycle(t, [desiredFromLeaf("k", k2, KEEPER)], { expectOk: true }))).toEqual([]);
				await assertReloadSafe(h);
				for (const sni of KEEPER)
					expect(await servedSerial(h, sni), `${sni} after the reload`).toBe(k2.serial);
			});
		});
	}
}
