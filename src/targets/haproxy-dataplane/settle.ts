/**
 * A reload under way behind a Data Plane API on this host. Its `/runtime/info` names the worker the API reaches;
 * during a reload the new worker reads the certificate files while the old one still answers, without saying
 * it is stopping, until the new one is ready. A write that reaches the old worker then looks done although the
 * new worker loaded the files from before it. When the API's URL is this host (loopback), its pids are this
 * host's: the process tree shows the reload (targets/haproxy/process-tree.ts: the master busy loading, then a
 * newer worker), and the worker is asked again until the new one answers. Elsewhere the pids are another
 * host's and nothing is waited for: the next cycle's observation, which notices the worker change, repairs what
 * the reload lost.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CertificateeError } from "../../errors.js";
import { processGone, reloadTooLong, reloadUnderWay } from "../haproxy/process-tree.js";

const SETTLE_POLL_MS = 50;

/** The URL names this host: `localhost`, `127.0.0.0/8` or `::1`. */
export function onLoopback(url: string): boolean {
	const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
	return host === "localhost" || host === "::1" || /^127\./.test(host);
}

/**
 * `ask()`'s worker info once its master is at rest with no newer worker starting (on loopback), at most
 * `timeoutMs`: past it, RUNTIME_RELOADED (retryable). Off loopback, or without a pid, the first answer.
 */
export async function settledWorkerInfo(
	ask: () => Promise<Record<string, string>>,
	options: { local: boolean; endpoint: string; timeoutMs: number; signal: AbortSignal },
): Promise<Record<string, string>> {
	const deadline = performance.now() + options.timeoutMs;
	let askedAgain = false;
	for (;;) {
		const info = await ask();
		const pid = Number(info.pid);
		if (!options.local || !Number.isInteger(pid)) return info;
		const reload = await reloadUnderWay(pid);
		if (reload === undefined) {
			if (askedAgain || !processGone(pid)) return info;
			askedAgain = true;
			continue;
		}
		if (performance.now() > deadline) {
			throw new CertificateeError(
				"RUNTIME_RELOADED",
				reloadTooLong(reload, `behind ${options.endpoint}`, pid, options.timeoutMs),
				{
					context: { endpoint: options.endpoint, operation: "worker" },
					retryable: true,
					hint: "the next cycle observes the new worker and writes what it lacks",
				},
			);
		}
		await sleep(SETTLE_POLL_MS, undefined, { signal: options.signal });
	}
}
