/**
 * Whether the HAProxy master beside a worker has started a newer worker: a reload under way.
 *
 * Why: during a reload the new worker reads the certificate files while the old one still answers the stats
 * socket and does not report itself stopping (the master tells it to stop only once the new one is ready). A
 * runtime write that reaches the old worker then looks done, although the new worker loaded the files from
 * before the write. The stats socket cannot tell; the process tree can: the worker's parent is the master
 * (`haproxy -W`), and a newer child of the same executable is the worker about to serve.
 *
 * Only where certificatee sees HAProxy's processes (the same host and PID namespace: a local socket). Elsewhere,
 * and for a HAProxy without a master, it says nothing (undefined), and the next cycle's observation, which
 * notices the worker change, repairs what the reload lost.
 */
import { readFileSync, readlinkSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { CertificateeError } from "../../errors.js";
import type { RuntimeClient, WorkerIdentity } from "./socket.js";

interface Stat {
	ppid: number;
	/** Clock ticks after boot: orders processes by start. */
	start: number;
}

/** `/proc/<pid>/stat`'s ppid and start time; undefined when the process is gone or not ours to see. */
function statOf(pid: number): Stat | undefined {
	try {
		const text = readFileSync(`/proc/${pid}/stat`, "utf8");
		// The command name is in parentheses and may hold spaces: fields are counted after the last ')'.
		const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
		return { ppid: Number(fields[1]), start: Number(fields[19]) };
	} catch {
		return undefined;
	}
}

function exeOf(pid: number): string | undefined {
	try {
		return readlinkSync(`/proc/${pid}/exe`);
	} catch {
		return undefined;
	}
}

function childrenOf(pid: number): number[] {
	try {
		return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
			.trim()
			.split(/\s+/)
			.filter(Boolean)
			.map(Number);
	} catch {
		return [];
	}
}

/**
 * The pid of a worker the master of `workerPid` started after it, or undefined: none, no master (the parent
 * runs another program), or the processes cannot be seen from here.
 */
export function newerWorker(workerPid: number): number | undefined {
	const worker = statOf(workerPid);
	if (worker === undefined || worker.ppid <= 1) return undefined;
	const exe = exeOf(workerPid);
	if (exe === undefined || exeOf(worker.ppid) !== exe) return undefined;
	for (const child of childrenOf(worker.ppid)) {
		if (child === workerPid) continue;
		const s = statOf(child);
		if (s !== undefined && s.start > worker.start && exeOf(child) === exe) return child;
	}
	return undefined;
}

/**
 * The worker that answers now. While its master is starting a newer one (a reload under way), waits until the
 * newer one answers, or it is gone (its start failed), at most `timeoutMs`: then the caller compares with the
 * worker it wrote to and writes again what the new worker lacks. `local`: the socket is a Unix socket on this
 * host, so HAProxy's pids are this host's.
 */
export async function settledWorker(
	client: Pick<RuntimeClient, "checkWorker" | "name">,
	options: { local: boolean; timeoutMs: number },
): Promise<WorkerIdentity> {
	let worker = await client.checkWorker();
	if (!options.local) return worker;
	const deadline = performance.now() + options.timeoutMs;
	while (newerWorker(worker.pid) !== undefined) {
		if (performance.now() > deadline) {
			throw new CertificateeError(
				"RUNTIME_RELOADED",
				`HAProxy on ${client.name} is reloading: a new worker has not taken over from worker ${worker.pid} within ${options.timeoutMs} ms`,
				{
					context: { endpoint: client.name, operation: "worker" },
					retryable: true,
					hint: "the next cycle observes the new worker and writes what it lacks",
				},
			);
		}
		await sleep(SETTLE_POLL_MS);
		worker = await client.checkWorker();
	}
	return worker;
}

const SETTLE_POLL_MS = 50;
