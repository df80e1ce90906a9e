/**
 * A certificate HAProxy's own ACME client manages (`load crt "d.pem" acme LE domains "d.lay.test"`, HAProxy
 * 3.2+, behind `expose-experimental-directives` in 3.2; issue 23): observed and reported, never written, even
 * when certificatee is configured with a certificate of the same names.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runOnlineChecks } from "../../../src/cli/commands/online.js";
import type { Config } from "../../../src/config/schema.js";
import { runtimeTargetSchema } from "../../../src/targets/haproxy-runtime/schema.js";
import { createTestCa, generateKeys, issueTestLeaf, keyToPem, type TestIssuer } from "../../harness/certs.js";
import { haproxyBuilds } from "../../harness/haproxy-builds.js";
import { syncOnce as cycle, rig, servedSerial } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("acme layout CA");
});

// The directory is never reached: HAProxy schedules a renewal weeks ahead, and this test ends before.
const ACME = `acme LE
    directory https://127.0.0.1:1/directory
    account-key {dir}/A/account.key
    contact ops@lay.test
    challenge HTTP-01

crt-store acm
    crt-base {dir}/A
    load crt "d.pem" acme LE domains "d.lay.test"`;

for (const build of haproxyBuilds(["3.2", "3.4"])) {
	describe(`HAProxy ${build.version}: a certificate HAProxy's ACME manages`, () => {
		it(`HAProxy ${build.version}: reported MANAGED_BY_HAPROXY_ACME, never written, no file created; validate --online warns`, async () => {
			const names = ["d.lay.test"];
			const live = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				globalLines: ["expose-experimental-directives"],
				sections: ACME,
				bindExtra: `crt "@acm/d.pem"`,
				files: {
					"A/d.pem": live.combinedPem,
					"A/account.key": await keyToPem((await generateKeys()).privateKey),
				},
			});
			const A = join(h.dir, "A");
			const t = r.runtime(h);
			const mine = await issueTestLeaf(ca, { names });
			for (let i = 0; i < 2; i++) {
				const e = await cycle(t, [desiredFromLeaf("d", mine, names)], { expectOk: true });
				expect(e.steps).toEqual([]);
				expect(e.verdicts).toContainEqual(
					expect.objectContaining({ class: "refused", ref: "@acm/d.pem", code: "MANAGED_BY_HAPROXY_ACME" }),
				);
			}
			expect(await readFile(join(A, "d.pem"), "utf8")).toBe(live.combinedPem);
			expect((await readdir(A)).sort()).toEqual(["account.key", "d.pem"]);
			expect((await readdir(h.crtDir)).sort()).toEqual([]);
			expect(await servedSerial(h, "d.lay.test")).toBe(live.serial);

			// validate --online warns: the configured certificate "d" is managed by HAProxy's ACME too.
			const target = runtimeTargetSchema.parse({
				name: "lb1",
				type: "haproxy-runtime",
				socket: h.adminSocket,
				crt_dir: h.crtDir,
			});
			const config = { targets: [target], certificates: [{ name: "d", domains: names }], sources: [] };
			const [check] = await runOnlineChecks(config as unknown as Config);
			expect(check?.ok).toBe(true);
			expect(check?.warnings).toEqual([
				`certificate "d" (d.lay.test) is also managed by HAProxy's own ACME client: @acm/d.pem, acme section "LE"; certificatee never writes it (MANAGED_BY_HAPROXY_ACME). Keep one ACME client per certificate`,
			]);
		});
	});
}
