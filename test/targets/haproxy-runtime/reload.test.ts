import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeServed } from "../../../src/probe/index.js";
import { RuntimeClient } from "../../../src/targets/haproxy-runtime/socket.js";
import { updateCertificate } from "../../../src/targets/haproxy-runtime/transaction.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";

describe("targets/haproxy-runtime: the client across a deliberate reload", () => {
	let ca: TestIssuer;
	let h: Haproxy;

	beforeAll(async () => {
		ca = await createTestCa("reload test root");
		const r = await issueTestLeaf(ca, { names: ["r.test"], serial: "2A01" });
		h = await startHaproxy({ crtDir: { "r.pem": r.combinedPem } });
	});
	afterAll(async () => {
		await h?.stop();
	});

	it("worker socket: a stale connection still says Success!, the client notices, reconnects and its write is served", async () => {
		const name = join(h.crtDir, "r.pem");
		const client = new RuntimeClient({ address: h.adminSocket });
		const stale = new RuntimeClient({ address: h.adminSocket });
		try {
			const first = await client.checkWorker();
			await stale.checkWorker();
			const reloaded = await h.reload();
			expect(reloaded.pid).not.toBe(first.pid);

			// The hazard: the old connection talks to the stopping worker and changes nothing served.
			const ghost = await issueTestLeaf(ca, { names: ["r.test"], serial: "2A02" });
			await stale.setCert(name, ghost.combinedPem);
			await stale.commitCert(name);
			expect((await probeServed({ address: h.address, sni: "r.test" })).serial).toBe("2A01");

			const v3 = await issueTestLeaf(ca, { names: ["r.test"], serial: "2A03" });
			const write = await updateCertificate(client, name, v3.combinedPem);
			expect(client.reloadsSeen).toBe(1);
			expect(client.worker?.pid).toBe(reloaded.pid);
			expect(write.detail.serial).toBe("2A03");
			expect((await probeServed({ address: h.address, sni: "r.test" })).serial).toBe("2A03");
		} finally {
			await client.close();
			await stale.close();
		}
	});

	it("master socket (@1): the reload drops the connection; the next write reaches the new worker and is served", async () => {
		const name = join(h.crtDir, "r.pem");
		const client = new RuntimeClient({ address: h.masterSocket, master: true });
		try {
			const first = await client.checkWorker();
			expect(first.pid).toBe(await h.workerPid());
			// Pipelined through the master: every answer arrives, in order, for the right command.
			const details = await Promise.all(Array.from({ length: 50 }, () => client.showCert(name)));
			const lists = await Promise.all(Array.from({ length: 20 }, () => client.showCrtLists()));
			expect(new Set(details.map((d) => d?.filename))).toEqual(new Set([name]));
			expect(new Set(lists.map((l) => l.join(",")))).toEqual(new Set([[h.crtDir, h.crtListPath].join(",")]));
			const reloaded = await h.reload();
			const v4 = await issueTestLeaf(ca, { names: ["r.test"], serial: "2A04" });
			const write = await updateCertificate(client, name, v4.combinedPem);
			expect(write.detail.serial).toBe("2A04");
			expect(client.worker?.pid).toBe(reloaded.pid);
			expect(client.reloadsSeen).toBe(1);
			expect((await probeServed({ address: h.address, sni: "r.test" })).serial).toBe("2A04");
		} finally {
			await client.close();
		}
	});
});
