/** The deploy-hook baseline's reload: SIGUSR2 to HAProxy's master, done when `done()` holds (polled every 10 ms). */
import { type Haproxy, socketCommand } from "../../test/harness/haproxy.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits (untimed) until the master can take the next reload: its CLI answers and knows the current worker.
 * A SIGUSR2 that arrives while the master is still re-executing itself after the previous one is lost.
 */
export async function masterReady(h: Haproxy, timeoutMs = 30_000): Promise<void> {
	const deadline = performance.now() + timeoutMs;
	for (;;) {
		try {
			const pid = await h.workerPid();
			if ((await socketCommand(h.masterSocket, "show proc", 2000)).includes(String(pid))) return;
		} catch {
			// not yet
		}
		if (performance.now() > deadline) throw new Error("HAProxy master not ready for a reload");
		await sleep(20);
	}
}

export async function reloadUntil(
	h: Haproxy,
	done: () => Promise<boolean>,
	timeoutMs = 60_000,
): Promise<void> {
	process.kill(h.masterPid, "SIGUSR2");
	const deadline = performance.now() + timeoutMs;
	for (;;) {
		if (await done().catch(() => false)) return;
		if (performance.now() > deadline)
			throw new Error(`reload not done within ${timeoutMs} ms:\n${h.log().slice(-2000)}`);
		await sleep(10);
	}
}

/** Reload done when a new worker answers on the admin socket. */
export async function reloadToNewWorker(h: Haproxy): Promise<void> {
	const before = await h.workerPid();
	await reloadUntil(h, async () => (await h.workerPid()) !== before);
}
