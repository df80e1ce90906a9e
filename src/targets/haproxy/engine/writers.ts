/**
 * One writer per HAProxy process. HAProxy has a single certificate transaction per process, shared by every
 * CLI connection (and every Data Plane API request): two writers interleaving `set`/`commit` on one process
 * can commit each other's certificate (docs/haproxy-runtime-target.md, "What certificatee does"). So every write goes
 * through the queue of the process it reaches, whichever target or endpoint sends it.
 *
 * A process is known by keys: the address an endpoint writes to (a normalised socket path or API URL), and,
 * once observed, the worker that answered (node, pid, start time). Endpoints that share any key share one
 * queue for the life of the registry; a false match only serialises writes, a missed one is what the
 * address keys and worker identity are there to prevent. One registry per engine, handed to the targets.
 */

/** The HAProxy worker that answered: from `show info` (Node, Pid, Uptime_sec) or the API's runtime info. */
export interface WorkerIdentity {
	node?: string;
	pid: number;
	/** When it started, in ms since the epoch (observation time minus its uptime). */
	startedAt: number;
}

/** What an endpoint knows of the process it writes to. */
export interface ProcessKeys {
	/** Normalised address (see socketKey, apiKey). */
	address: string;
	worker?: WorkerIdentity;
}

export interface WriteQueue {
	/** Runs `write` after every write queued before it on the same process. */
	run<T>(write: () => Promise<T>): Promise<T>;
}

export interface WriteQueues {
	/** The queue of the process known by these keys; keys seen together are one process from then on. */
	queueFor(keys: ProcessKeys): WriteQueue;
}

// Start times are estimated (uptime has a one-second resolution, read during an observation that may take
// many seconds); they only guard against a reused pid, which cannot happen while the old worker is alive.
const START_TOLERANCE_MS = 60_000;

/** Same pid and node, started within a few seconds: the same worker (a reload always forks a new pid). */
export function sameWorker(a: WorkerIdentity, b: WorkerIdentity): boolean {
	return (
		a.pid === b.pid &&
		(a.node === undefined || b.node === undefined || a.node === b.node) &&
		Math.abs(a.startedAt - b.startedAt) <= START_TOLERANCE_MS
	);
}

/** The worker an observation's `info` names (`pid`, `uptime_sec`, optional `node`), if it names one. */
export function workerFromInfo(
	info: Readonly<Record<string, string>> | undefined,
	observedAt: Date,
): WorkerIdentity | undefined {
	const pid = Number(info?.pid);
	const uptime = Number(info?.uptime_sec);
	if (!Number.isInteger(pid) || pid <= 0 || !Number.isFinite(uptime)) return undefined;
	return {
		...(info?.node ? { node: info.node } : {}),
		pid,
		startedAt: observedAt.getTime() - uptime * 1000,
	};
}

/** A runtime socket address as a key: `unix@` dropped, dot segments and repeated slashes resolved. */
export function socketKey(address: string): string {
	const path = address.startsWith("unix@") ? address.slice(5) : address;
	if (!path.includes("/")) return `socket:${path.toLowerCase()}`;
	const parts: string[] = [];
	for (const part of path.split("/")) {
		if (part === "" || part === ".") continue;
		if (part === "..") parts.pop();
		else parts.push(part);
	}
	return `socket:${path.startsWith("/") ? "/" : ""}${parts.join("/")}`;
}

/** A Data Plane API base URL as a key: scheme, lowercase host, default port dropped, no trailing slash. */
export function apiKey(url: string): string {
	const u = new URL(url);
	return `api:${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "")}`;
}

interface Group {
	parent?: Group;
	tail: Promise<unknown>;
}

export function createWriteQueues(): WriteQueues {
	const byAddress = new Map<string, Group>();
	const workers: Array<{ worker: WorkerIdentity; group: Group }> = [];

	const root = (g: Group): Group => {
		let r = g;
		while (r.parent) r = r.parent;
		return r;
	};
	// Two groups found to be one process: later writes wait for both tails.
	const join = (a: Group, b: Group): Group => {
		const ra = root(a);
		const rb = root(b);
		if (ra === rb) return ra;
		const merged: Group = { tail: Promise.all([ra.tail, rb.tail]).catch(() => undefined) };
		ra.parent = merged;
		rb.parent = merged;
		return merged;
	};

	return {
		queueFor(keys) {
			let group = byAddress.get(keys.address);
			if (!group) {
				group = { tail: Promise.resolve() };
				byAddress.set(keys.address, group);
			}
			if (keys.worker) {
				const worker = keys.worker;
				const known = workers.find((w) => sameWorker(w.worker, worker));
				if (known) group = join(known.group, group);
				else workers.push({ worker, group });
			}
			const member = group;
			return {
				run<T>(write: () => Promise<T>): Promise<T> {
					const r = root(member);
					const task = r.tail.then(write);
					r.tail = task.catch(() => undefined);
					return task;
				},
			};
		},
	};
}
