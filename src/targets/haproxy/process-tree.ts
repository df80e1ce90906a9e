/**
 * HAProxy's process tree, where certificatee can see it (the same host and PID namespace): whether the master of
 * a worker is reloading. During a reload the new worker reads the certificate files while the old one still
 * answers its stats socket and does not report itself stopping (the master tells it to stop only once the new
 * one is ready): a runtime write that reaches the old worker then looks done, although the new worker loaded the
 * files from before the write. The socket cannot tell; the process tree can, in two phases:
 * - up to HAProxy 3.0 the master re-executes itself (same pid) and reads the whole configuration and every
 *   certificate file before it forks the new worker: for that time it is busy, not waiting in its poller;
 * - then (from 3.1 at once, the worker reads the files) a newer child of the same executable is starting.
 * Used by the runtime socket target (haproxy-runtime/workers.ts) and the Data Plane API target on loopback.
 */
import { readFileSync, readlinkSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { CertificateeError } from "../../errors.js";

/** `/proc/<pid>/stat`'s fields certificatee reads. */
export interface Stat {
	/** The command name (the executable's base name, at most 15 characters). */
	comm: string;
	/** R running, S sleeping, D uninterruptible, ... */
	state: string;
	ppid: number;
	/** utime + stime, in clock ticks. */
	cpuTicks: number;
	/** Clock ticks after boot: orders processes by start. */
	start: number;
}

/** Parses `/proc/<pid>/stat`: the command name is in parentheses and may hold spaces and ')'. */
export function parseStat(text: string): Stat {
	const close = text.lastIndexOf(")");
	const fields = text.slice(close + 2).split(" ");
	return {
		comm: text.slice(text.indexOf("(") + 1, close),
		state: fields[0] ?? "",
		ppid: Number(fields[1]),
		cpuTicks: Number(fields[11]) + Number(fields[12]),
		start: Number(fields[19]),
	};
}

function statOf(pid: number): Stat | undefined {
	try {
		return parseStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
	} catch {
		return undefined;
	}
}

/** The executable, or undefined when not ours to see (another user); a binary replaced on disk (a package
 * upgrade, then a reload) is the same program. */
function exeOf(pid: number): string | undefined {
	try {
		return readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, "");
	} catch {
		return undefined;
	}
}

/** Whether two processes run the same program: their executables, or where those cannot be read (HAProxy runs
 * as another user), their command names. */
function sameProgram(a: number, b: number): boolean {
	const [ea, eb] = [exeOf(a), exeOf(b)];
	if (ea !== undefined && eb !== undefined) return ea === eb;
	const [sa, sb] = [statOf(a), statOf(b)];
	return sa !== undefined && sb !== undefined && sa.comm === sb.comm;
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
 * Syscalls a HAProxy master waits in between events, by architecture: its poller (epoll by default; poll or
 * select with `noepoll`). A master blocked in anything else, or running, is doing work: after a SIGUSR2, loading.
 */
const POLLER_WAITS: Record<string, ReadonlySet<number>> = {
	// epoll_wait, epoll_pwait, epoll_pwait2, poll, ppoll, select, pselect6
	x64: new Set([232, 281, 441, 7, 271, 23, 270]),
	// epoll_pwait, epoll_pwait2, ppoll, pselect6 (the generic table has no epoll_wait, poll or select)
	arm64: new Set([22, 441, 73, 72]),
};

/**
 * Whether a master is at rest, from `/proc/<pid>/syscall` ("running", "-1 ..." blocked outside a syscall, or
 * "<nr> <args>...") where it can be read (the same user as HAProxy, or CAP_SYS_PTRACE): at rest only while
 * blocked in its poller. Undefined when that file says nothing usable (another architecture).
 */
export function atRestBySyscall(syscall: string, arch: string = process.arch): boolean | undefined {
	const waits = POLLER_WAITS[arch];
	if (waits === undefined) return undefined;
	const nr = Number(syscall.trim().split(" ")[0]);
	return Number.isInteger(nr) && waits.has(nr);
}

/**
 * Whether a master is at rest from two `/proc/<pid>/stat` samples taken a moment apart, where its syscall cannot
 * be read: sleeping both times and no CPU time spent between. Coarser (a load blocked on a slow DNS answer
 * looks at rest), but loading the files keeps a process running.
 */
export function atRestByStat(before: Stat, after: Stat): boolean {
	return before.state === "S" && after.state === "S" && after.cpuTicks === before.cpuTicks;
}

const STAT_GAP_MS = 20;
/** How long a busy reading is looked at again, and how often: a master at rest wakes for moments (to relay a
 * master CLI command, to reap a child) and is back in its poller within them, even on a loaded machine; a
 * loading master never is before it forks (sampled on 2.6, 2.8, 3.0, 3.2 and 3.4; the one exception is within
 * 0.2 ms of the SIGUSR2, before the wake-up reached it: a signal that recent came after certificatee's writes,
 * so the master will read the files they wrote). */
const SYSCALL_WINDOW_MS = 20;
const SYSCALL_GAP_MS = 2;

function syscallOf(pid: number): string | undefined {
	try {
		return readFileSync(`/proc/${pid}/syscall`, "utf8");
	} catch {
		return undefined;
	}
}

async function masterAtRest(master: number): Promise<boolean> {
	const until = performance.now() + SYSCALL_WINDOW_MS;
	for (;;) {
		const syscall = syscallOf(master);
		const atRest = syscall === undefined ? undefined : atRestBySyscall(syscall);
		if (atRest === undefined) break;
		if (atRest) return true;
		if (performance.now() >= until) return false;
		await sleep(SYSCALL_GAP_MS);
	}
	const before = statOf(master);
	await sleep(STAT_GAP_MS);
	const after = statOf(master);
	return before === undefined || after === undefined || atRestByStat(before, after);
}

/**
 * The pid of a worker the master of `workerPid` started after it, or undefined: none, no master (the parent
 * runs another program), or the processes cannot be seen from here.
 */
export function newerWorker(workerPid: number): number | undefined {
	const worker = statOf(workerPid);
	if (worker === undefined || worker.ppid <= 1 || !sameProgram(workerPid, worker.ppid)) return undefined;
	for (const child of childrenOf(worker.ppid)) {
		if (child === workerPid) continue;
		const s = statOf(child);
		if (s !== undefined && s.start > worker.start && sameProgram(child, workerPid)) return child;
	}
	return undefined;
}

/** What the process tree says of a worker's master: reloading, and in which phase, or nothing to say. */
export type Reload = { phase: "master-loading"; master: number } | { phase: "new-worker"; worker: number };

/**
 * A reload under way behind `workerPid`: its master busy (up to 3.0, loading the files before it forks), or a
 * newer worker started. Undefined when the master is at rest with no newer worker, or there is no master to see.
 */
export async function reloadUnderWay(workerPid: number): Promise<Reload | undefined> {
	const worker = statOf(workerPid);
	if (worker === undefined || worker.ppid <= 1 || !sameProgram(workerPid, worker.ppid)) return undefined;
	// The master first, the children after: a reload goes from busy to forked to at rest, so a newer worker
	// forked while the master was looked at is in the children read after it.
	const atRest = await masterAtRest(worker.ppid);
	const newer = newerWorker(workerPid);
	if (newer !== undefined) return { phase: "new-worker", worker: newer };
	return atRest ? undefined : { phase: "master-loading", master: worker.ppid };
}

/**
 * `ask()`'s answer once the worker it names (`pidOf`) has settled: its master at rest with no newer worker
 * starting, asked again every 50 ms while a reload is under way, at most `timeoutMs` (then RUNTIME_RELOADED,
 * retryable). A worker that answered and is already gone from /proc was an old one finishing its last request
 * (from 3.0 the master still routes `@1` to it for a while): asked about once more, once only, since pids of
 * another namespace (a container) all read "gone". Used by the runtime socket target (workers.ts) and the Data
 * Plane API target on loopback (settle.ts): only where HAProxy's pids are this host's.
 */
export async function settleWorker<T>(
	ask: () => Promise<T>,
	pidOf: (answer: T) => number | undefined,
	options: { endpoint: string; where: string; timeoutMs: number; signal?: AbortSignal },
): Promise<T> {
	const deadline = performance.now() + options.timeoutMs;
	let askedAgain = false;
	for (;;) {
		const answer = await ask();
		const pid = pidOf(answer);
		if (pid === undefined) return answer;
		const reload = await reloadUnderWay(pid);
		if (reload === undefined) {
			if (askedAgain || !processGone(pid)) return answer;
			askedAgain = true;
			continue;
		}
		if (performance.now() > deadline) {
			throw reloadTooLong(reload, { ...options, workerPid: pid });
		}
		await sleep(SETTLE_POLL_MS, undefined, options.signal ? { signal: options.signal } : undefined);
	}
}

const SETTLE_POLL_MS = 50;

/** Whether `pid` is gone from this host's /proc (or is another namespace's). */
export function processGone(pid: number): boolean {
	return statOf(pid) === undefined;
}

/** RUNTIME_RELOADED (retryable): the reload behind `workerPid` still under way after `timeoutMs`. */
export function reloadTooLong(
	reload: Reload,
	o: { endpoint: string; where: string; workerPid: number; timeoutMs: number; operation?: string },
): CertificateeError {
	const phase =
		reload.phase === "new-worker"
			? `worker ${reload.worker} has started`
			: `its master ${reload.master} is still loading the configuration`;
	return new CertificateeError(
		"RUNTIME_RELOADED",
		`HAProxy ${o.where} is reloading: no new worker has taken over from worker ${o.workerPid} within ${o.timeoutMs} ms (${phase})`,
		{
			context: { endpoint: o.endpoint, operation: o.operation ?? "worker" },
			retryable: true,
			hint: "the next cycle observes the new worker and writes what it lacks",
		},
	);
}
