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
import { setTimeout as sleep } from "node:timers/promises";
import { CertificateeError } from "../../errors.js";
import { processGone, reloadTooLong, reloadUnderWay } from "../haproxy/process-tree.js";
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
	const deadline = performance.now() + options.timeoutMs;
	let askedAgain = false;
	for (;;) {
		const worker = await client.checkWorker();
		if (!options.local) return worker;
		const reload = await reloadUnderWay(worker.pid);
		if (reload === undefined) {
			if (askedAgain || !processGone(worker.pid)) return worker;
			askedAgain = true;
			continue;
		}
		if (performance.now() > deadline) {
			throw new CertificateeError(
				"RUNTIME_RELOADED",
				reloadTooLong(reload, `on ${client.name}`, worker.pid, options.timeoutMs),
				{
					context: { endpoint: client.name, operation: "worker" },
					retryable: true,
					hint: "the next cycle observes the new worker and writes what it lacks",
				},
			);
		}
		await sleep(SETTLE_POLL_MS);
	}
}

const SETTLE_POLL_MS = 50;
