/** The deploy-hook baseline's reload: SIGUSR2 to HAProxy's master, done when `done()` holds (polled every 10 ms). */
import type { Haproxy } from "../../test/harness/haproxy.js";

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
		await new Promise((r) => setTimeout(r, 10));
	}
}

/** Reload done when a new worker answers on the admin socket. */
export async function reloadToNewWorker(h: Haproxy): Promise<void> {
	const before = await h.workerPid();
	await reloadUntil(h, async () => (await h.workerPid()) !== before);
}
