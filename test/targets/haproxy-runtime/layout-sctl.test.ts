/**
 * A certificate HAProxy loaded with an `.sctl` file (signed certificate timestamps) on a real HAProxy: `set ssl
 * cert` + `commit ssl cert` of it crashes the worker on 2.6-3.4 (a segfault, then the master exits: every
 * frontend down), whatever the new content. So certificatee never updates it at runtime: the renewal is refused
 * (SCTL_HOT_SWAP_UNSAFE, naming the file), HAProxy keeps serving the old certificate, nothing is written. Once an
 * operator removes the .sctl and reloads, the renewal goes out without a reload. The first case asserts the
 * crash itself, so a HAProxy that fixes it shows here.
 */
import { existsSync, readFileSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { haproxyBinAndBuilds } from "../../harness/haproxy-builds.js";
import { syncOnce as cycle, rig, servedSerial, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
/** The crash case's HAProxy is dead by its end: no reload-safety check of it. */
const crashed = rig();
beforeAll(async () => {
	ca = await createTestCa("sctl CA");
});

/** An SCT list (RFC 6962 3.3) of one SCT: HAProxy checks only its framing, as it does a real log's. */
function sctList(): Buffer {
	const sig = Buffer.alloc(70, 0x5a);
	const sct = Buffer.concat([
		Buffer.from([0]), // v1
		Buffer.alloc(32, 0x11), // log id
		Buffer.from([0, 0, 1, 0x8b, 0xcf, 0xe5, 0x68, 0]), // timestamp
		Buffer.from([0, 0]), // no extensions
		Buffer.from([4, 3, 0, sig.length]), // sha256 / ecdsa, signature length
		sig,
	]);
	const item = Buffer.concat([Buffer.from([sct.length >> 8, sct.length & 0xff]), sct]);
	return Buffer.concat([Buffer.from([item.length >> 8, item.length & 0xff]), item]);
}

/** HAProxy serving s.pem, with s.pem.sctl beside it loaded by a reload (the SCT list is binary). */
async function withSctl(on: typeof r, bin: string, pem: string) {
	const h = await on.haproxy({ bin, crtDir: { "s.pem": pem } });
	await writeFile(join(h.crtDir, "s.pem.sctl"), sctList(), { mode: 0o600 });
	await h.reload();
	return h;
}

for (const build of haproxyBinAndBuilds(["3.2", "3.4"])) {
	describe(`HAProxy ${build.version}: s.pem with s.pem.sctl in a crt directory`, () => {
		const names = ["s.lay.test"];

		it(`HAProxy ${build.version}: a runtime update of it crashes the worker (why certificatee refuses it)`, async () => {
			const old = await issueTestLeaf(ca, { names });
			const now = await issueTestLeaf(ca, { names });
			const h = await withSctl(crashed, build.bin, old.combinedPem);
			const file = join(h.crtDir, "s.pem");
			await h.command(`set ssl cert ${file} <<\n${now.combinedPem.trimEnd()}\n`).catch(() => "");
			await h.command(`commit ssl cert ${file}`).catch(() => "");
			await expect(h.worker(), "the worker is gone").rejects.toThrow();
		});

		it(`HAProxy ${build.version}: its renewal is refused (SCTL_HOT_SWAP_UNSAFE), nothing written, HAProxy keeps serving; renewed in place once the .sctl is gone and HAProxy reloaded`, async () => {
			const old = await issueTestLeaf(ca, { names });
			const now = await issueTestLeaf(ca, { names });
			const h = await withSctl(r, build.bin, old.combinedPem);
			const file = (f: string) => join(h.crtDir, f);
			const want = [desiredFromLeaf("s", now, names)];
			const worker = await h.worker();

			const e = await cycle(r.runtime(h), want);
			expect(writes(e)).toEqual([]);
			expect(e.verdicts).toContainEqual(
				expect.objectContaining({ class: "refused", ref: "s.pem", code: "SCTL_HOT_SWAP_UNSAFE" }),
			);
			expect(e.verdicts.find((v) => v.class === "refused")?.why).toContain(file("s.pem.sctl"));
			expect((await h.worker()).pid, "the same worker, alive").toBe(worker.pid);
			expect(await servedSerial(h, "s.lay.test")).toBe(old.serial);
			expect(readFileSync(file("s.pem"), "utf8")).toBe(old.combinedPem);
			expect(existsSync(file("s.pem.sctl"))).toBe(true);

			// The operator's step: the .sctl goes, HAProxy reloads once.
			await rm(file("s.pem.sctl"));
			await h.reload();
			const renewed = await cycle(r.runtime(h), want, { expectOk: true });
			expect(writes(renewed)).toEqual(["storage-replace s.pem", "runtime-set s.pem"]);
			expect(await servedSerial(h, "s.lay.test")).toBe(now.serial);
			await h.reload();
			expect(await servedSerial(h, "s.lay.test"), "after a reload").toBe(now.serial);
		});
	});
}
