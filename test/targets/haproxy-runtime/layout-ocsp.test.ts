/**
 * A renewed certificate's `.ocsp` and `.issuer` on a real HAProxy (issue 23; docs/layouts.md, engine/placement.ts):
 * HAProxy loads and staples `o.pem.ocsp` (issued for the old certificate, with `o.pem.issuer` naming its CA); the
 * renewal removes the `.ocsp` before it writes `o.pem`, keeps the `.issuer` as it was, and neither the running
 * worker nor one started by a reload holds an OCSP response for the new certificate.
 */
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { haproxyBinAndBuilds } from "../../harness/haproxy-builds.js";
import { ocspResponse } from "../../harness/ocsp.js";
import { syncOnce as cycle, rig, servedSerial, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("ocsp CA");
});

const OCSP_HELD = /^OCSP Response Key: [0-9a-f]+$/m;

for (const build of haproxyBinAndBuilds(["3.2", "3.4"])) {
	describe(`HAProxy ${build.version}: o.pem with o.pem.ocsp and o.pem.issuer in a crt directory`, () => {
		it(`HAProxy ${build.version}: renewed: the .ocsp removed, the .issuer kept; served, and after a reload with no OCSP response`, async () => {
			const names = ["o.lay.test"];
			const old = await issueTestLeaf(ca, { names });
			const now = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				crtDir: { "o.pem": old.combinedPem, "o.pem.issuer": ca.certPem },
			});
			const file = (f: string) => join(h.crtDir, f);
			// DER: written beside the certificate, then loaded by a reload.
			await writeFile(file("o.pem.ocsp"), await ocspResponse(ca, old), { mode: 0o600 });
			await h.reload();
			const show = () => h.command(`show ssl cert ${file("o.pem")}`);
			expect(await show(), "HAProxy loaded the old certificate's OCSP response").toMatch(OCSP_HELD);

			const e = await cycle(r.runtime(h), [desiredFromLeaf("o", now, names)], { expectOk: true });
			expect(writes(e)).toEqual(["storage-replace o.pem", "runtime-set o.pem"]);
			expect(existsSync(file("o.pem.ocsp")), "the old certificate's OCSP response is gone").toBe(false);
			expect(await readFile(file("o.pem.issuer"), "utf8")).toBe(ca.certPem);
			expect(await servedSerial(h, "o.lay.test")).toBe(now.serial);
			expect(await show()).not.toMatch(OCSP_HELD);

			await h.reload();
			expect(await servedSerial(h, "o.lay.test"), "after a reload").toBe(now.serial);
			expect(await show(), "after a reload").not.toMatch(OCSP_HELD);
			expect(writes(await cycle(r.runtime(h), [desiredFromLeaf("o", now, names)]))).toEqual([]);
		});
	});
}
