/**
 * Issue 25, finding 11 (the caps): a client that sends its headers slowly is cut off after the header
 * timeout, not after Node's 60 s; connections beyond the cap are closed on accept, and the listener answers
 * again once they are gone. Real sockets on loopback.
 */
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetrics } from "../../src/metrics/index.js";
import { type HealthServer, LISTENER_LIMITS, startHealthServer } from "../../src/metrics/server.js";

let server: HealthServer;
beforeAll(async () => {
	server = await startHealthServer(
		"127.0.0.1:0",
		createMetrics(),
		() => ({ intervalMs: 4_000, startedAt: Date.now(), configLoaded: true }),
		() => undefined,
	);
});
afterAll(async () => {
	await server?.close();
});

function open(): Promise<Socket> {
	const [host, port] = server.address.split(":") as [string, string];
	return new Promise((resolve, reject) => {
		const s = connect(Number(port), host, () => resolve(s));
		s.once("error", reject);
	});
}

/** Resolves with how long the server took to close `s` (ms), or "open" after `ms`. */
function closedWithin(s: Socket, ms: number): Promise<number | "open"> {
	const started = Date.now();
	return new Promise((resolve) => {
		const timer = setTimeout(() => resolve("open"), ms);
		s.once("close", () => {
			clearTimeout(timer);
			resolve(Date.now() - started);
		});
		s.on("error", () => {});
		s.resume();
	});
}

describe("the HTTP listener's limits", () => {
	it("a client that never finishes its headers is closed after the header timeout", async () => {
		const slow = await open();
		slow.write("GET /healthz HTTP/1.1\r\nHost: x\r\n");
		const took = await closedWithin(slow, 30_000);
		expect(took).not.toBe("open");
		expect(took as number).toBeLessThan(
			LISTENER_LIMITS.headersTimeoutMs + 3 * LISTENER_LIMITS.checkIntervalMs + 2_000,
		);
	}, 40_000);

	it(`connections beyond ${LISTENER_LIMITS.maxConnections} are closed on accept; the listener answers once they are gone`, async () => {
		const held: Socket[] = [];
		try {
			for (let i = 0; i < LISTENER_LIMITS.maxConnections; i++) held.push(await open());
			const extra = await open();
			expect(await closedWithin(extra, 5_000)).not.toBe("open");
		} finally {
			for (const s of held) s.destroy();
		}
		const deadline = Date.now() + 10_000;
		let status = 0;
		while (status !== 200 && Date.now() < deadline) {
			status = await fetch(`http://${server.address}/healthz`, { signal: AbortSignal.timeout(2_000) }).then(
				(r) => r.status,
				() => 0,
			);
		}
		expect(status).toBe(200);
	}, 40_000);
});
