/**
 * The connection side of a runtime client: one persistent prompt-mode connection (connection.ts frames
 * the answers), opened on demand and again after HAProxy closed it (`stats timeout`, a reload), and the
 * worker it talks to.
 *
 * - Ordering: reads are pipelined behind the last lone command, within the connection's window of
 *   unanswered requests (sized from tune.bufsize); any other command waits for everything before it and
 *   runs alone (a group sent together, such as `set` + `commit`, runs alone as one).
 * - A read is re-sent once on a fresh connection when the old one closed under it.
 * - Every new connection asks `show info` and records the worker's `Pid`; a change counts as a reload.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { isUnixSocket } from "../../base/address.js";
import { isCertificateeError } from "../../errors.js";
import { reloadTooLong, reloadUnderWay } from "../haproxy/process-tree.js";
import { Connection, windowFor } from "./connection.js";
import { parseInfo } from "./parse.js";

/** The worker a connection talks to. */
export interface WorkerIdentity {
	/** `Node` of `show info` (the `node` setting, by default the host name). */
	node?: string;
	pid: number;
	uptimeSec: number;
	stopping: boolean;
}

export interface SessionOptions {
	address: string;
	/** Through the master CLI: the session's own `show info` goes to `@1`. */
	master: boolean;
	/** The endpoint's name, for errors. */
	name: string;
	timeoutMs: number;
	/** HAProxy's tune.bufsize: sizes the window of unanswered requests (connection.ts). */
	bufsize: number;
	/** A refused connect waits while a reload is under way (see #open). Default true. */
	reloadWait?: boolean;
}

// 100 + 200 + 400 + 800 ms between attempts: fails fast enough when down, and rides out a short master re-exec
// where the process tree cannot be seen.
const CONNECT_ATTEMPTS = 5;
const RELOAD_POLL_MS = 50;

export class RuntimeSession {
	readonly #options: SessionOptions;
	#connection: Connection | undefined;
	#connecting: Promise<Connection> | undefined;
	/** The last command that runs alone (writes, payloads); reads queue behind it. */
	#barrier: Promise<unknown> = Promise.resolve();
	/** Reads in flight since the barrier: pipelined on the one connection. */
	readonly #reads = new Set<Promise<unknown>>();
	#writeQueue: Promise<unknown> = Promise.resolve();
	#worker: WorkerIdentity | undefined;
	#reloads = 0;

	/** HAProxy's pids are this host's: a Unix socket (a TCP address may be another host's), and the owner wants
	 * a refused connect to wait for a reload. */
	readonly #local: boolean;

	constructor(options: SessionOptions) {
		this.#options = options;
		this.#local = options.reloadWait !== false && isUnixSocket(options.address);
	}

	get worker(): WorkerIdentity | undefined {
		return this.#worker;
	}
	get reloadsSeen(): number {
		return this.#reloads;
	}

	/** Sends a framed request in order (see the header) and resolves with its answer. */
	send(request: string, read: boolean): Promise<string> {
		if (read) {
			const task = this.#barrier.then(() => this.#sendNow(request, true));
			const settled = task.catch(() => undefined);
			this.#reads.add(settled);
			void settled.then(() => this.#reads.delete(settled));
			return task;
		}
		const prior = [this.#barrier, ...this.#reads];
		this.#reads.clear();
		const task = Promise.all(prior).then(() => this.#sendNow(request, false));
		this.#barrier = task.catch(() => undefined);
		return task;
	}

	/**
	 * Writes several requests back to back, without waiting for an answer in between, and resolves with their
	 * answers in order. Ordered like any command that is not a read (alone, after everything before it); never
	 * re-sent (what ran before the connection closed is unknown).
	 */
	sendTogether(requests: readonly string[]): Promise<string[]> {
		const prior = [this.#barrier, ...this.#reads];
		this.#reads.clear();
		const task = Promise.all(prior).then(async () => {
			const connection = await this.#connect();
			try {
				return await Promise.all(requests.map((r) => connection.send(r, this.#options.timeoutMs)));
			} finally {
				if (this.#connection === connection && connection.closed) this.#connection = undefined;
			}
		});
		this.#barrier = task.catch(() => undefined);
		return task;
	}

	/** Runs `fn` while no other `exclusive` task of this session runs. */
	exclusive<T>(fn: () => Promise<T>): Promise<T> {
		const task = this.#writeQueue.then(fn);
		this.#writeQueue = task.catch(() => undefined);
		return task;
	}

	/**
	 * Given the worker a fresh `show info` saw: drops the connection when that worker is stopping (old) or is
	 * not the one known (the master routes to a new one), recording a new worker. Returns whether it dropped.
	 */
	followWorker(seen: WorkerIdentity): boolean {
		const known = this.#worker;
		if (!seen.stopping && (known === undefined || known.pid === seen.pid)) return false;
		this.#connection?.close();
		this.#connection = undefined;
		if (!seen.stopping) this.#noteWorker(seen);
		return true;
	}

	/** Waits for every command sent, then closes the connection. */
	async close(): Promise<void> {
		await Promise.all([this.#barrier, ...this.#reads]);
		this.#connection?.close();
		this.#connection = undefined;
	}

	async #sendNow(request: string, retry: boolean): Promise<string> {
		const connection = await this.#connect();
		try {
			return await connection.send(request, this.#options.timeoutMs);
		} catch (e) {
			if (this.#connection === connection && connection.closed) this.#connection = undefined;
			if (!retry || !connection.closed) throw e;
			return (await this.#connect()).send(request, this.#options.timeoutMs);
		}
	}

	async #connect(): Promise<Connection> {
		if (this.#connection && !this.#connection.closed) return this.#connection;
		this.#connection = undefined;
		this.#connecting ??= this.#openAndIdentify().finally(() => {
			this.#connecting = undefined;
		});
		return this.#connecting;
	}

	async #openAndIdentify(): Promise<Connection> {
		const connection = await this.#open();
		const prefix = this.#options.master ? "@1 " : "";
		try {
			const info = await connection.send(`${prefix}show info\n`, this.#options.timeoutMs);
			this.#noteWorker(workerIdentity(parseInfo(info)));
		} catch (e) {
			connection.close();
			throw e;
		}
		this.#connection = connection;
		return connection;
	}

	/**
	 * Connects, retrying briefly (a HAProxy that is down fails within 1.5 s) and, where HAProxy's processes can be
	 * seen, for as long as a reload of the worker last met is under way (at most `timeoutMs`, then
	 * RUNTIME_RELOADED): the master re-executes itself on a reload and refuses its CLI until it is back, which up
	 * to HAProxy 3.0 includes loading every certificate file (2.6 with 300 RSA files on 2 busy cores: 0.9-2.7 s).
	 */
	async #open(): Promise<Connection> {
		const { address, name, timeoutMs, bufsize } = this.#options;
		const deadline = performance.now() + timeoutMs;
		for (let attempt = 1; ; ) {
			try {
				return await Connection.open(address, name, timeoutMs, windowFor(bufsize));
			} catch (e) {
				if (!isCertificateeError(e, "ENDPOINT_UNAVAILABLE")) throw e;
				// The worker last met, where its pids are this host's (a Unix socket).
				const worker = this.#local ? this.#worker : undefined;
				const reload = worker === undefined ? undefined : await reloadUnderWay(worker.pid);
				if (worker !== undefined && reload !== undefined) {
					if (performance.now() > deadline) {
						throw reloadTooLong(reload, {
							endpoint: name,
							where: `on ${name}`,
							workerPid: worker.pid,
							timeoutMs,
							operation: "connect",
						});
					}
					await sleep(RELOAD_POLL_MS);
					continue;
				}
				if (attempt >= CONNECT_ATTEMPTS) throw e;
				await sleep(50 * 2 ** attempt);
				attempt += 1;
			}
		}
	}

	#noteWorker(seen: WorkerIdentity): void {
		if (this.#worker !== undefined && this.#worker.pid !== seen.pid) this.#reloads += 1;
		this.#worker = seen;
	}
}

/** The worker a `show info` answer describes. */
export function workerIdentity(info: Record<string, string>): WorkerIdentity {
	return {
		...(info.Node ? { node: info.Node } : {}),
		pid: Number(info.Pid ?? 0),
		uptimeSec: Number(info.Uptime_sec ?? 0),
		stopping: info.Stopping === "1",
	};
}
