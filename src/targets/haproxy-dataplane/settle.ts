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
import { settleWorker } from "../haproxy/process-tree.js";

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
	if (!options.local) return ask();
	return settleWorker(
		ask,
		(info) => {
			const pid = Number(info.pid);
			return Number.isInteger(pid) ? pid : undefined;
		},
		{
			endpoint: options.endpoint,
			where: `behind ${options.endpoint}`,
			timeoutMs: options.timeoutMs,
			signal: options.signal,
		},
	);
}
