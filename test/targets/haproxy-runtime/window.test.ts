/**
 * The bounded window of unanswered CLI requests (connection.ts; issue 23: HAProxy 3.2.0's CLI spins once its
 * output buffer is full while requests wait in its input). Counted where it matters, at the other end of a real
 * socket: a CLI stand-in that answers each request a little later and records how many it had received and not
 * yet answered, and the bytes of their answers. Then a real HAProxy: a certificate with many names and a long
 * chain answers `show ssl cert` with far more than the 2 KB budgeted, and many such reads pipelined keep its
 * worker alive (on 3.2.0 too, in the matrix).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Connection, windowFor } from "../../../src/targets/haproxy-runtime/connection.js";
import { RuntimeClient } from "../../../src/targets/haproxy-runtime/socket.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";
import { rig } from "../../harness/targets.js";

const BUFSIZE = 16_384;

interface Stand {
	path: string;
	/** Most requests received and not yet answered at once. */
	deepest: number;
	/** Most bytes of answers owed at once (answers not yet written, of requests received). */
	owed: number;
	server: Server;
}

/** A CLI stand-in: `prompt` switches prompt mode on; every other line is answered `answerBytes` long, 2 ms later. */
async function stand(dir: string, answerBytes: (request: string) => number): Promise<Stand> {
	const s: Stand = { path: join(dir, "cli.sock"), deepest: 0, owed: 0, server: createServer() };
	s.server.on("connection", (socket) => {
		let buffered = "";
		let prompt = false;
		const waiting: string[] = [];
		const answerNext = () => {
			const request = waiting.shift();
			if (request === undefined) return;
			socket.write(`${"x".repeat(answerBytes(request) - 3)}\n> `);
			if (waiting.length > 0) setTimeout(answerNext, 2);
		};
		socket.on("data", (chunk: Buffer) => {
			buffered += chunk.toString();
			for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
				const line = buffered.slice(0, nl);
				buffered = buffered.slice(nl + 1);
				if (!prompt && line === "prompt") {
					prompt = true;
					socket.write("\n> ");
					continue;
				}
				waiting.push(line);
				if (waiting.length === 1) setTimeout(answerNext, 2);
			}
			s.deepest = Math.max(s.deepest, waiting.length);
			s.owed = Math.max(
				s.owed,
				waiting.reduce((sum, r) => sum + answerBytes(r), 0),
			);
		});
		socket.on("error", () => {});
	});
	await new Promise<void>((resolve) => s.server.listen(s.path, resolve));
	return s;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
	for (const c of cleanups.splice(0).reverse()) await c();
});

async function withStand(answerBytes: (request: string) => number): Promise<Stand> {
	const dir = await mkdtemp(join(tmpdir(), "certificatee-window-"));
	const s = await stand(dir, answerBytes);
	cleanups.push(async () => {
		await new Promise<void>((resolve) => s.server.close(() => resolve()));
		await rm(dir, { recursive: true, force: true });
	});
	return s;
}

async function pipeline(s: Stand, requests: string[]): Promise<Connection> {
	const c = await Connection.open(s.path, "stand-in", 10_000, windowFor(BUFSIZE));
	cleanups.push(async () => c.close());
	const answers = await Promise.all(requests.map((r) => c.send(`${r}\n`, 10_000)));
	expect(answers).toHaveLength(requests.length);
	return c;
}

describe("haproxy-runtime: the window of unanswered CLI requests, counted at the other end of the socket", () => {
	it("2 KB answers at tune.bufsize 16384: never more than 8 requests unanswered, and 8 are", async () => {
		const s = await withStand(() => 2_048);
		const c = await pipeline(
			s,
			Array.from({ length: 60 }, (_, i) => `show ssl cert /etc/haproxy/certs/site-${i}.pem`),
		);
		expect(windowFor(BUFSIZE).requests).toBe(8);
		expect(s.deepest).toBe(8);
		expect(c.deepest).toBe(8);
		expect(s.owed).toBeLessThanOrEqual(BUFSIZE);
	});

	it("requests of 3,000 bytes: at most half an input buffer of them unanswered (2)", async () => {
		const s = await withStand(() => 100);
		await pipeline(
			s,
			Array.from({ length: 20 }, (_, i) => `show ssl cert /${"d".repeat(2_970)}/${i}.pem`),
		);
		expect(s.deepest).toBe(2);
	});

	it("answers of 8 KB (a certificate with many names, a long chain): after the first, never more owed than one output buffer", async () => {
		// Answers are budgeted at 2 KB until one larger comes: the first read goes alone, then 30 pipelined.
		// 8 KB: what HAProxy 2.6 and 3.4 answer for the 150-name certificate below (8.1-8.5 KB).
		const s = await withStand(() => 8_000);
		const c = await Connection.open(s.path, "stand-in", 10_000, windowFor(BUFSIZE));
		cleanups.push(async () => c.close());
		await c.send("show ssl cert first\n", 10_000);
		await Promise.all(Array.from({ length: 30 }, (_, i) => c.send(`show ssl cert big-${i}\n`, 10_000)));
		expect(s.deepest).toBe(2);
		expect(s.owed).toBeLessThanOrEqual(BUFSIZE);
	});
});

const r = rig({ reloadSafe: true });

describe("haproxy-runtime: large show ssl cert answers at a real HAProxy", () => {
	it("a certificate with 150 names and 3 intermediates answers with more than 2 KB; 200 pipelined reads of it leave the worker alive and answer in full", async () => {
		const ca = await createTestCa("window CA");
		const i1 = await createTestCa("window intermediate 1");
		const i2 = await createTestCa("window intermediate 2");
		const i3 = await createTestCa("window intermediate 3");
		const names = Array.from({ length: 150 }, (_, i) => `host-${i}.a-rather-long-name-under.window.test`);
		const leaf = await issueTestLeaf(ca, { names, intermediates: [i1, i2, i3] });
		const h = await r.haproxy({ crtDir: { "big.pem": leaf.combinedPem } });
		const name = join(h.crtDir, "big.pem");
		const one = await h.command(`show ssl cert ${name}`);
		expect(Buffer.byteLength(one)).toBeGreaterThan(2 * 2_048);
		const pid = await h.workerPid();
		const client = new RuntimeClient({ address: h.adminSocket, name: "window" });
		r.onTeardown(() => client.close());
		const answers = await Promise.all(Array.from({ length: 200 }, () => client.showCert(name)));
		expect(answers.every((a) => a?.serial === leaf.serial)).toBe(true);
		expect(await h.workerPid()).toBe(pid);
	});
});
