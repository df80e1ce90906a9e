/**
 * HAProxy's process tree, where certificatee can see it (the same host and PID namespace): whether the master of
 * a worker has started a newer worker, a reload under way. During a reload the new worker reads the certificate
 * files while the old one still answers its stats socket and does not report itself stopping (the master tells
 * it to stop only once the new one is ready): a runtime write that reaches the old worker then looks done,
 * although the new worker loaded the files from before the write. The socket cannot tell; the process tree can.
 * Used by the runtime socket target (haproxy-runtime/workers.ts) and the Data Plane API target on loopback.
 */
import { readFileSync, readlinkSync } from "node:fs";

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
