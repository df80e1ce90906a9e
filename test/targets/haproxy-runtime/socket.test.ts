import { X509Certificate } from "node:crypto";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import { probeServed } from "../../../src/probe/index.js";
import { RuntimeClient } from "../../../src/targets/haproxy-runtime/socket.js";
import {
	addCertificate,
	updateCertificate,
	updateCertificates,
} from "../../../src/targets/haproxy-runtime/transaction.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { HAPROXY_VERSION, type Haproxy, haproxyLine, startHaproxy } from "../../harness/haproxy.js";

function sha1(pem: string): string {
	return new X509Certificate(pem).fingerprint.replaceAll(":", "");
}

async function codeOf(p: Promise<unknown>): Promise<string> {
	try {
		await p;
		return "resolved";
	} catch (e) {
		if (isCertificateeError(e)) return e.code;
		throw e;
	}
}

describe("targets/haproxy-runtime/socket against a real HAProxy", () => {
	let ca: TestIssuer;
	let h: Haproxy;
	let client: RuntimeClient;
	let a: Awaited<ReturnType<typeof issueTestLeaf>>;
	let chained: Awaited<ReturnType<typeof issueTestLeaf>>;
	let intermediate: TestIssuer;

	beforeAll(async () => {
		ca = await createTestCa("socket test root");
		intermediate = await createTestCa("socket test intermediate", { issuer: ca });
		a = await issueTestLeaf(ca, { names: ["a.test", "www.a.test"], serial: "1A01", keyType: "rsa-2048" });
		chained = await issueTestLeaf(ca, { names: ["chain.test"], intermediates: [intermediate] });
		const l2 = await issueTestLeaf(ca, { names: ["l2.test"] });
		h = await startHaproxy({
			crtDir: { "a.pem": a.combinedPem, "chain.pem": chained.combinedPem },
			crtList: [
				{ file: "l2.pem", pem: l2.combinedPem, sslOptions: "alpn h2,http/1.1", filters: ["l2.test"] },
			],
			tcpStatsSocket: true,
			extraConfig: "global\n    stats socket unix@{dir}/operator.sock mode 600 level operator",
		});
		client = new RuntimeClient({ address: h.adminSocket, name: "lb-test" });
	});
	afterAll(async () => {
		await client?.close();
		await h?.stop();
	});

	it("lists the store and parses a certificate's detail like node:crypto sees it", async () => {
		const list = await client.showCerts();
		expect(list.names).toEqual(
			expect.arrayContaining([
				join(h.crtDir, "a.pem"),
				join(h.crtDir, "chain.pem"),
				join(h.dir, "list", "l2.pem"),
			]),
		);
		expect(list.transaction).toBeUndefined();

		const detail = await client.showCert(join(h.crtDir, "a.pem"));
		const x = new X509Certificate(a.certPem);
		expect(detail).toMatchObject({
			filename: join(h.crtDir, "a.pem"),
			status: "Used",
			serial: "1A01",
			sans: ["a.test", "www.a.test"],
			algorithm: "RSA2048",
			sha1: sha1(a.certPem),
			subject: "/CN=a.test",
			chain: [],
		});
		expect(detail?.notAfter?.getTime()).toBe(new Date(x.validTo).getTime());

		const withChain = await client.showCert(join(h.crtDir, "chain.pem"));
		expect(withChain?.chain).toEqual([
			{ subject: "/CN=socket test intermediate", issuer: "/CN=socket test root" },
		]);
		expect(withChain?.algorithm).toBe("EC256");
		expect(await client.showCert(join(h.crtDir, "nope.pem"))).toBeUndefined();
	});

	it("speaks the same protocol over a TCP stats socket", async () => {
		const tcp = new RuntimeClient({ address: h.adminTcp ?? "", name: "lb-tcp" });
		try {
			expect((await tcp.checkWorker()).pid).toBe(await h.workerPid());
			expect((await tcp.showCert(join(h.crtDir, "a.pem")))?.serial).toBe("1A01");
		} finally {
			await tcp.close();
		}
	});

	it("reports 'Permission denied' on an operator-level socket as a failed command with a hint", async () => {
		const operator = new RuntimeClient({ address: join(h.dir, "operator.sock"), name: "lb-operator" });
		try {
			const err = await operator.showCrtLists().catch((e: unknown) => e);
			expect(isCertificateeError(err, "RUNTIME_COMMAND_FAILED")).toBe(true);
			expect(isCertificateeError(err) && err.hint).toMatch(/level admin/);
		} finally {
			await operator.close();
		}
	});

	it("reads show info and crt-lists (directory named without slash, NUL after ALPN dropped)", async () => {
		const info = await client.showInfo();
		expect(Number(info.Pid)).toBe(await h.workerPid());
		expect(await client.showCrtLists()).toEqual([h.crtDir, h.crtListPath]);
		const entries = await client.showCrtList(h.crtListPath);
		expect(entries).toEqual([
			{ file: join(h.dir, "list", "l2.pem"), line: 1, options: "alpn h2,http/1.1", filters: ["l2.test"] },
		]);
		const dir = await client.showCrtList(h.crtDir);
		expect(dir?.map((e) => e.file).sort()).toEqual([join(h.crtDir, "a.pem"), join(h.crtDir, "chain.pem")]);
		expect(await client.showCrtList(join(h.dir, "nosuch.list"))).toBeUndefined();
	});

	it("hot-swaps a certificate (set + commit) with CRLF and blank lines normalised, no reload", async () => {
		const before = await h.worker();
		const v2 = await issueTestLeaf(ca, { names: ["a.test", "www.a.test"], serial: "1A02" });
		const messy = `\r\n${v2.certPem.replaceAll("\n", "\r\n")}\r\n\r\n${v2.keyPem}\n\n`;
		const name = join(h.crtDir, "a.pem");
		expect(await client.setCert(name, messy)).toBe("created");
		expect((await client.showCerts()).transaction).toBe(name);
		expect((await client.showCert(`*${name}`))?.serial).toBe("1A02");
		expect((await probeServed({ address: h.address, sni: "a.test" })).serial).toBe("1A01");
		await client.commitCert(name);
		expect((await probeServed({ address: h.address, sni: "www.a.test" })).serial).toBe("1A02");
		const after = await h.worker();
		expect(after.pid).toBe(before.pid);
		expect(after.uptimeSec).toBeGreaterThanOrEqual(before.uptimeSec);
	});

	it("reports each failure from HAProxy's text as RUNTIME_COMMAND_FAILED, a certificate still in use as RUNTIME_CERT_IN_USE", async () => {
		const v = await issueTestLeaf(ca, { names: ["z.test"] });
		expect(await codeOf(client.setCert(join(h.crtDir, "zzz.pem"), v.combinedPem))).toBe(
			"RUNTIME_COMMAND_FAILED",
		);
		expect(await codeOf(client.setCert(join(h.crtDir, "a.pem"), "not a pem"))).toBe("RUNTIME_COMMAND_FAILED");
		expect(await codeOf(client.commitCert(join(h.crtDir, "a.pem")))).toBe("RUNTIME_COMMAND_FAILED");
		expect(await client.abortCert(join(h.crtDir, "a.pem"))).toBe(false);
		expect(await codeOf(client.newCert(join(h.crtDir, "a.pem")))).toBe("RUNTIME_COMMAND_FAILED");
		expect(await codeOf(client.delCert(join(h.crtDir, "a.pem")))).toBe("RUNTIME_CERT_IN_USE");
		expect(await codeOf(client.delCert(join(h.crtDir, "ghost.pem")))).toBe("RUNTIME_COMMAND_FAILED");
		expect(await codeOf(client.delCrtListEntry(h.crtDir, join(h.crtDir, "ghost.pem")))).toBe(
			"RUNTIME_COMMAND_FAILED",
		);
		expect(await codeOf(client.delCrtListEntry(join(h.dir, "nosuch.list"), "x.pem"))).toBe(
			"RUNTIME_COMMAND_FAILED",
		);
		// Unsafe names never reach the socket.
		expect(await codeOf(client.showCert("a.pem\nshow info"))).toBe("RUNTIME_COMMAND_FAILED");
		expect(await codeOf(client.setCert("a b", v.combinedPem))).toBe("RUNTIME_COMMAND_FAILED");
		const refused = client.setCert(join(h.crtDir, "zzz.pem"), v.combinedPem);
		await expect(refused).rejects.toMatchObject({
			code: "RUNTIME_COMMAND_FAILED",
			context: { endpoint: "lb-test", operation: "set ssl cert" },
		});
		await expect(refused).rejects.toSatisfy((e) => !String(e).includes("BEGIN"));
		expect((await client.showCerts()).transaction).toBeUndefined();
	});

	it("a failed commit (key mismatch) leaves a transaction; the next update aborts it and succeeds", async () => {
		const name = join(h.crtDir, "a.pem");
		const good = await issueTestLeaf(ca, { names: ["a.test", "www.a.test"], serial: "1A03" });
		const other = await issueTestLeaf(ca, { names: ["a.test"] });
		expect(await client.setCert(name, `${good.certPem}\n${other.keyPem}`)).toBe("created");
		const failure = await codeOf(client.commitCert(name));
		expect(failure).toBe("RUNTIME_COMMAND_FAILED");
		expect((await client.showCerts()).transaction).toBe(name);
		expect((await probeServed({ address: h.address, sni: "a.test" })).serial).not.toBe("1A03");

		const write = await updateCertificate(client, name, good.combinedPem);
		expect(write.abortedStale).toBe(name);
		expect(write.detail.serial).toBe("1A03");
		expect(write.detail.sha1).toBe(sha1(good.certPem));
		expect((await client.showCerts()).transaction).toBeUndefined();
		expect((await probeServed({ address: h.address, sni: "a.test" })).serial).toBe("1A03");
	});

	it("updateCertificate aborts its own transaction when the commit fails", async () => {
		const name = join(h.crtDir, "a.pem");
		const good = await issueTestLeaf(ca, { names: ["a.test"] });
		const other = await issueTestLeaf(ca, { names: ["a.test"] });
		expect(await codeOf(updateCertificate(client, name, `${good.certPem}\n${other.keyPem}`))).toBe(
			"RUNTIME_COMMAND_FAILED",
		);
		expect((await client.showCerts()).transaction).toBeUndefined();
		expect((await probeServed({ address: h.address, sni: "a.test" })).serial).toBe("1A03");
	});

	it("detects 2.6.12's cross-certificate transaction (set on A answered for B) and refuses it", async () => {
		const b = join(h.crtDir, "chain.pem");
		const a2 = await issueTestLeaf(ca, { names: ["a.test"] });
		expect(await client.setCert(b, chained.combinedPem)).toBe("created");
		const err = await codeOf(client.setCert(join(h.crtDir, "a.pem"), a2.combinedPem));
		expect(err).toBe("RUNTIME_COMMAND_FAILED");
		expect(await client.abortCert(b)).toBe(true);
		expect((await client.showCert(b))?.sans).toEqual(["chain.test"]);
	});

	// certificatee names a certificate it adds to a crt directory inside that directory (<dir>/<ref>) and
	// never relies on this refusal: 3.4 takes the entry, which a reload would drop (the file is not there).
	it(`add ssl crt-list <crt dir> <a file outside it>: refused by HAProxy 2.6-3.2, accepted by 3.4 (here ${HAPROXY_VERSION}, its verbatim answer)`, async () => {
		const name = join(h.dir, "list", "outside.pem");
		const leaf = await issueTestLeaf(ca, { names: ["outside.test"] });
		await client.newCert(name);
		await client.setCert(name, leaf.combinedPem);
		await client.commitCert(name);
		const answer = (await client.run(`add ssl crt-list ${h.crtDir} ${name}`)).trimEnd();
		const listed = (await client.showCrtList(h.crtDir))?.map((e) => e.file);
		if (haproxyLine() >= 304) {
			expect(answer).toBe(`Inserting certificate '${name}' in crt-list '${h.crtDir}'.\nSuccess!`);
			expect(listed).toContain(name);
			await client.delCrtListEntry(h.crtDir, name);
		} else {
			expect(answer).toBe(
				`Can't edit the crt-list: '${h.crtDir}' is a directory, certificate path '${name}' must contain the directory path`,
			);
			expect(listed).not.toContain(name);
			expect(await codeOf(client.addCrtListEntry(h.crtDir, name))).toBe("RUNTIME_COMMAND_FAILED");
		}
		await client.delCert(name);
		expect((await client.showCerts()).names).not.toContain(name);
	});

	it("adds a new certificate live (new, set, commit, add crt-list) into a crt-list file and a crt dir, then removes it", async () => {
		const before = await h.workerPid();
		const n1 = await issueTestLeaf(ca, { names: ["new1.test"] });
		const n2 = await issueTestLeaf(ca, { names: ["new2.test"] });
		const name1 = join(h.dir, "list", "new1.pem");
		const name2 = join(h.crtDir, "new2.pem");

		// Empty stores cannot join a crt-list.
		await client.newCert(join(h.crtDir, "empty.pem"));
		expect((await client.showCert(join(h.crtDir, "empty.pem")))?.status).toBe("Empty");
		expect(await codeOf(client.addCrtListEntry(h.crtDir, join(h.crtDir, "empty.pem")))).toBe(
			"RUNTIME_COMMAND_FAILED",
		);
		await client.delCert(join(h.crtDir, "empty.pem"));

		const w1 = await addCertificate(client, name1, n1.combinedPem, h.crtListPath, {
			sslOptions: "alpn h2",
			filters: ["new1.test", "alias1.test"],
		});
		expect(w1).toMatchObject({ created: true, addedToCrtList: true });
		const w2 = await addCertificate(client, name2, n2.combinedPem, h.crtDir);
		expect(w2.detail.status).toBe("Used");
		expect((await probeServed({ address: h.address, sni: "alias1.test" })).serial).toBe(n1.serial);
		expect((await probeServed({ address: h.address, sni: "new2.test" })).serial).toBe(n2.serial);
		const listed = await client.showCrtList(h.crtListPath);
		expect(listed?.find((e) => e.file === name1)).toMatchObject({
			options: "alpn h2",
			filters: ["new1.test", "alias1.test"],
		});
		// In use: cannot delete; after removing the crt-list entry: can.
		expect(await codeOf(client.delCert(name2))).toBe("RUNTIME_CERT_IN_USE");
		await client.delCrtListEntry(h.crtDir, name2);
		await client.delCert(name2);
		await client.delCrtListEntry(h.crtListPath, name1);
		await client.delCert(name1);
		expect((await client.showCerts()).names).not.toContain(name1);
		expect((await probeServed({ address: h.address, sni: "new2.test" })).names).toEqual(["default.invalid"]);
		expect(await h.workerPid()).toBe(before);
	});

	it("refuses a request of tune.bufsize bytes or more without sending it; HAProxy stays up and serving", async () => {
		const name = join(h.crtDir, "a.pem");
		const head = `set ssl cert ${name} <<\n`;
		const v = await issueTestLeaf(ca, { names: ["a.test"] });
		const filler = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
		let pem = v.combinedPem;
		while (Buffer.byteLength(`${head}${pem}\n`) < 16_384) pem += filler;
		const err = await client.setCert(name, pem).catch((e: unknown) => e);
		expect(isCertificateeError(err, "RUNTIME_PAYLOAD_TOO_LARGE")).toBe(true);
		expect(String((err as Error).message)).toMatch(/16384/);
		expect(h.alive()).toBe(true);
		expect((await client.showCerts()).transaction).toBeUndefined();
		expect((await probeServed({ address: h.address, sni: "a.test" })).serial).toBe("1A03");
	});

	it("survives HAProxy closing an idle connection (stats timeout) and runs many reads over one connection", async () => {
		const short = await startHaproxy({ statsTimeout: "1s" });
		const c = new RuntimeClient({ address: short.adminSocket });
		try {
			const pid = (await c.checkWorker()).pid;
			await new Promise((r) => setTimeout(r, 1_300));
			expect(Number((await c.showInfo()).Pid)).toBe(pid);
			expect(c.reloadsSeen).toBe(0);
			const answers = await Promise.all(Array.from({ length: 200 }, () => c.showCrtLists()));
			expect(new Set(answers.map((a) => a.join(","))).size).toBe(1);
		} finally {
			await c.close();
			await short.stop();
		}
	});

	it("updateCertificates writes several back to back; one that fails is reported alone and leaves no transaction", async () => {
		const nameA = join(h.crtDir, "a.pem");
		const nameChain = join(h.crtDir, "chain.pem");
		const a4 = await issueTestLeaf(ca, { names: ["a.test", "www.a.test"], serial: "1A04" });
		const other = await issueTestLeaf(ca, { names: ["chain.test"] });
		const chain2 = await issueTestLeaf(ca, { names: ["chain.test"], intermediates: [intermediate] });
		// A stale transaction from someone else is aborted first.
		expect(await client.setCert(nameChain, chained.combinedPem)).toBe("created");
		const results = await updateCertificates(client, [
			{ name: nameChain, pem: `${other.certPem}\n${a4.keyPem}` }, // key mismatch: refused at commit
			{ name: nameA, pem: a4.combinedPem },
			{ name: nameChain, pem: chain2.combinedPem },
		]);
		expect(results[0]).toMatchObject({ code: "RUNTIME_COMMAND_FAILED" });
		expect(results[1]).toMatchObject({ abortedStale: nameChain, detail: { serial: "1A04" } });
		expect(results[2]).toMatchObject({ detail: { serial: chain2.serial, sha1: sha1(chain2.certPem) } });
		expect((await client.showCerts()).transaction).toBeUndefined();
		expect((await probeServed({ address: h.address, sni: "a.test" })).serial).toBe("1A04");
		expect((await probeServed({ address: h.address, sni: "chain.test" })).serial).toBe(chain2.serial);
	});
});
