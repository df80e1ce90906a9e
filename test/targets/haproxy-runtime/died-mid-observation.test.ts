/**
 * HAProxy dies while certificatee observes it (issue 23: HAProxy 3.2.0's watchdog killed the worker under a
 * deep pipeline and the master followed it, while `plan` printed "converged: nothing to do"). The stats
 * socket is reached through a relay that counts the bytes HAProxy answers; once part of the observation's
 * `show ssl cert` answers went through, the worker (then the master) is killed with SIGKILL. The endpoint
 * must be failed, naming the endpoint, never converged, and the next cycle must say the same.
 */
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createTestCa, generateKeys, issueTestLeaf, type TestLeaf } from "../../harness/certs.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { runtimeTarget } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

const COUNT = 400;

interface Relay {
	path: string;
	/** Bytes HAProxy sent through the relay so far. */
	answered(): number;
	/** Resolves once HAProxy sent `bytes` bytes through the relay. */
	after(bytes: number): Promise<void>;
	close(): Promise<void>;
}

/** A unix socket relaying to `target`, counting what comes back. */
async function startRelay(target: string): Promise<Relay> {
	const dir = await mkdtemp(join(tmpdir(), "certificatee-relay-"));
	const path = join(dir, "relay.sock");
	let answered = 0;
	const waiters: Array<{ bytes: number; resolve: () => void }> = [];
	const sockets = new Set<net.Socket>();
	const server = net.createServer((client) => {
		const upstream = net.connect(target);
		for (const s of [client, upstream]) {
			sockets.add(s);
			s.on("error", () => undefined);
			s.on("close", () => {
				sockets.delete(s);
				client.destroy();
				upstream.destroy();
			});
		}
		upstream.on("data", (chunk: Buffer) => {
			answered += chunk.length;
			for (const w of waiters.filter((x) => answered >= x.bytes)) {
				waiters.splice(waiters.indexOf(w), 1);
				w.resolve();
			}
		});
		client.pipe(upstream);
		upstream.pipe(client);
	});
	await new Promise<void>((resolve) => server.listen(path, resolve));
	return {
		path,
		answered: () => answered,
		after: (bytes) =>
			answered >= bytes ? Promise.resolve() : new Promise((resolve) => waiters.push({ bytes, resolve })),
		async close() {
			for (const s of sockets) s.destroy();
			await new Promise<void>((resolve) => server.close(() => resolve()));
			await rm(dir, { recursive: true, force: true });
		},
	};
}

describe("targets/haproxy-runtime: HAProxy killed during an observation", () => {
	const cleanup: Array<() => Promise<void>> = [];
	afterEach(async () => {
		for (const c of cleanup.splice(0).reverse()) await c();
	});

	async function fleet(): Promise<{ h: Haproxy; leaves: Map<string, TestLeaf> }> {
		const ca = await createTestCa("died root");
		const keys = await generateKeys("ec-p256");
		const leaves = new Map<string, TestLeaf>();
		const files: Record<string, string> = {};
		await Promise.all(
			Array.from({ length: COUNT }, async (_, i) => {
				const ref = `d${String(i).padStart(4, "0")}.pem`;
				const leaf = await issueTestLeaf(ca, { names: [`d${i}.died.test`], keys });
				leaves.set(ref, leaf);
				files[ref] = leaf.combinedPem;
			}),
		);
		const h = await startHaproxy({ crtDir: files });
		cleanup.push(() => h.stop());
		return { h, leaves };
	}

	it.each([
		["the worker (the master follows it: exit-on-failure)", "worker"],
		["the master and the worker", "both"],
	] as const)("kill -9 of %s mid-observation: the endpoint is failed, not converged", async (_, whom) => {
		const { h, leaves } = await fleet();
		const relay = await startRelay(h.adminSocket);
		cleanup.push(() => relay.close());
		const target = runtimeTarget(h, { socket: relay.path, probe: h.address });
		cleanup.push(() => target.close());
		const desired = [...leaves]
			.slice(0, 20)
			.map(([ref, leaf]) =>
				desiredFromLeaf(ref.replace(/\.pem$/, ""), leaf, [`d${Number(ref.slice(1, 5))}.died.test`]),
			);

		const worker = await h.workerPid();
		// A `show ssl cert <name>` answer is about 700 bytes: a quarter of the details has gone through.
		const killed = relay.after((COUNT * 700) / 4).then(() => {
			process.kill(worker, "SIGKILL");
			if (whom === "both") process.kill(h.masterPid, "SIGKILL");
		});
		const report = await target.run(desired, "plan", new AbortController().signal);
		await killed;
		const e = report.endpoints[0];
		expect(relay.answered()).toBeGreaterThan((COUNT * 700) / 4);
		expect(e?.ok, JSON.stringify(e)).toBe(false);
		expect(e?.error?.code).toMatch(/^ENDPOINT_(UNAVAILABLE|TIMEOUT)$/);
		expect(e?.error?.message).toContain("lb1");

		// The next cycle finds it down too.
		const again = await target.run(desired, "plan", new AbortController().signal);
		expect(again.endpoints[0]?.ok).toBe(false);
	});
});
