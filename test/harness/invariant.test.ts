/**
 * The reload-safety invariant can fail: a certificate that lives only in HAProxy's memory, a file deleted
 * while the crt-list file names it, and a file on disk that the running worker never loaded are each caught;
 * a clean HAProxy passes.
 */
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { RuntimeClient } from "../../src/targets/haproxy-runtime/socket.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "./certs.js";
import { type Haproxy, startHaproxy } from "./haproxy.js";
import { assertReloadSafe } from "./invariant.js";

let ca: TestIssuer;
const running: Haproxy[] = [];

beforeAll(async () => {
	ca = await createTestCa("invariant CA");
});
afterEach(async () => {
	for (const h of running.splice(0)) await h.stop();
});

async function start(...names: string[][]): Promise<Haproxy> {
	const crtList = [];
	for (const [i, n] of names.entries()) {
		crtList.push({ file: `c${i}.pem`, pem: (await issueTestLeaf(ca, { names: n })).combinedPem });
	}
	const h = await startHaproxy({ crtList });
	running.push(h);
	return h;
}

describe("assertReloadSafe", () => {
	it("passes on a clean HAProxy, wildcards included, and twice in a row", async () => {
		const h = await start(["a.test", "*.a.test"], ["b.test"]);
		await assertReloadSafe(h);
		await assertReloadSafe(h, { names: ["unknown.test"] });
	});

	it("rejects a certificate added at runtime only (new/set/commit/add ssl crt-list, nothing on disk)", async () => {
		const h = await start(["a.test"]);
		const leaf = await issueTestLeaf(ca, { names: ["memory-only.test"] });
		const path = join(h.dir, "list", "memory-only.pem");
		const client = new RuntimeClient({ address: h.adminSocket });
		try {
			await client.newCert(path);
			await client.setCert(path, leaf.combinedPem);
			await client.commitCert(path);
			await client.addCrtListEntry(h.crtListPath, path);
		} finally {
			await client.close();
		}
		await expect(assertReloadSafe(h)).rejects.toThrow(
			/memory-only\.test: [0-9A-F]+ \(list\/memory-only\.pem in memory only\) -> [0-9A-F]+ \(default\.pem\)/,
		);
		// The config check passed (the file is named nowhere on disk); the probe after the reload caught it.
	});

	it("rejects a certificate file deleted while the crt-list file names it (haproxy -c fails)", async () => {
		const h = await start(["a.test"], ["b.test"]);
		await rm(join(h.dir, "list", "c1.pem"));
		await expect(assertReloadSafe(h)).rejects.toThrow(
			/haproxy -c .*failed:\n.*unable to stat SSL certificate/s,
		);
	});

	it("rejects a certificate written to the crt directory that the running worker never loaded", async () => {
		const h = await start(["a.test"]);
		const leaf = await issueTestLeaf(ca, { names: ["disk-only.test"] });
		await writeFile(join(h.crtDir, "disk-only.pem"), leaf.combinedPem, { mode: 0o600 });
		await expect(assertReloadSafe(h)).rejects.toThrow(
			/disk-only\.test: [0-9A-F]+ \(default\.pem\) -> [0-9A-F]+ \(certs\/disk-only\.pem on disk only\)/,
		);
		await expect(assertReloadSafe(h)).resolves.toBeUndefined(); // the reload took it: converged since
	});

	it("except: a name deliberately left to a reload is not compared", async () => {
		const h = await start(["a.test"]);
		const leaf = await issueTestLeaf(ca, { names: ["pending.test"] });
		await writeFile(join(h.crtDir, "pending.pem"), leaf.combinedPem, { mode: 0o600 });
		await assertReloadSafe(h, { except: ["pending.test"] });
	});
});
