/**
 * Whether the HAProxy master beside a worker has started a newer worker: a reload under way.
 *
 * Why: during a reload the new worker reads the certificate files while the old one still answers the stats
 * socket and does not report itself stopping (the master tells it to stop only once the new one is ready). A
 * runtime write that reaches the old worker then looks done, although the new worker loaded the files from
 * before the write. The stats socket cannot tell; the process tree can: the worker's parent is the master
 * (`haproxy -W`), busy while it loads the files (up to 3.0, before it forks), and a newer child of the same
 * executable is the worker about to serve (targets/haproxy/process-tree.ts).
 *
 * Only where certificatee sees HAProxy's processes (the same host and PID namespace: a local socket). Elsewhere,
 * and for a HAProxy without a master, it says nothing (undefined), and the next cycle's observation, which
 * notices the worker change, repairs what the reload lost.
 */
import { settleWorker } from "../haproxy/process-tree.js";
import type { RuntimeClient, WorkerIdentity } from "./socket.js";

/**
 * The worker that answers now. While its master is loading or starting a newer one (a reload under way), waits
 * until the newer one answers, or it is gone (its start failed), at most `timeoutMs`: then the caller compares with the
 * worker it wrote to and writes again what the new worker lacks. `local`: the socket is a Unix socket on this
 * host, so HAProxy's pids are this host's.
 */
export async function settledWorker(
	client: Pick<RuntimeClient, "checkWorker" | "name">,
	options: { local: boolean; timeoutMs: number },
): Promise<WorkerIdentity> {
	const ask = () => client.checkWorker();
	if (!options.local) return ask();
	return settleWorker(ask, (worker) => worker.pid, {
		endpoint: client.name,
		where: `on ${client.name}`,
		timeoutMs: options.timeoutMs,
	});
}
