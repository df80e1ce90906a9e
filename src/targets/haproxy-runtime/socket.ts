/**
 * HAProxy runtime API client for certificates over one persistent prompt-mode connection.
 *
 * - Worker stats socket (`level admin`) or master CLI (`master: true`: every command is prefixed `@1 `,
 *   so it always reaches the current worker; the master drops the connection on reload).
 * - One outstanding command at a time (a queue); reconnects on close (HAProxy's `stats timeout`).
 * - Reload detection: each connection records the worker's `Pid`; `checkWorker()` compares it with a
 *   fresh `show info` and reconnects when the worker is stopping or another one answers.
 * - Failures are recognised from HAProxy's exact texts and thrown as CertificateeError:
 *   RUNTIME_COMMAND_FAILED, RUNTIME_CERT_IN_USE (`del ssl cert` of a certificate still used), RUNTIME_LOCKED (after retries with backoff), RUNTIME_PAYLOAD_TOO_LARGE
 *   (never sent: a request of tune.bufsize bytes or more makes HAProxy 2.6-3.2 spin and exit),
 *   ENDPOINT_UNAVAILABLE / ENDPOINT_TIMEOUT.
 * - `exclusive()` serialises multi-command certificate writes (HAProxy has one transaction per process).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CertificateeError, type ErrorCode, isCertificateeError, scrubSecrets } from "../../errors.js";
import { DEFAULT_BUFSIZE, payloadTooLarge } from "../haproxy/bufsize.js";
import { Connection } from "./connection.js";
import {
	type CertDetail,
	type CertList,
	type CrtListEntry,
	expect,
	firstLine,
	isLocked,
	normalisePem,
	parseCertDetail,
	parseCertList,
	parseCrtList,
	parseCrtLists,
	parseInfo,
	refusalCode,
} from "./parse.js";

export interface RuntimeClientOptions {
	/** Unix socket path or host:port. */
	address: string;
	/** The address is the master CLI (`-S`): commands go to the current worker through `@1`. */
	master?: boolean;
	/** Name used in errors (the endpoint's config name). Default: the address. */
	name?: string;
	/** Per-command timeout. Default 10 s. */
	timeoutMs?: number;
	/** HAProxy's tune.bufsize: requests of this size or more are refused. Default 16384. */
	bufsize?: number;
	/** Attempts while HAProxy answers "Operations on certificates are currently locked!" (backoff from
	 * 10 ms doubling to 500 ms, jittered). Default 10: about 2 s in all. */
	lockAttempts?: number;
}

/** The worker a connection talks to. */
export interface WorkerIdentity {
	/** `Node` of `show info` (the `node` setting, by default the host name). */
	node?: string;
	pid: number;
	uptimeSec: number;
	stopping: boolean;
}

/** Optional crt-list line parts for `add ssl crt-list`. */
export interface CrtListEntryOptions {
	/** SSL options without brackets, e.g. "alpn h2,http/1.1". */
	sslOptions?: string;
	/** SNI filters. */
	filters?: string[];
}

// 100 + 200 + 400 + 800 ms between attempts: rides out a master re-exec, fails fast enough when down.
const CONNECT_ATTEMPTS = 5;
const SAFE_NAME = /^[^\s\0<>;#]+$/;

export class RuntimeClient {
	readonly name: string;
	readonly #options: Required<Omit<RuntimeClientOptions, "name">>;
	#connection: Connection | undefined;
	#connecting: Promise<Connection> | undefined;
	/** The last command that runs alone (writes, payloads); reads queue behind it. */
	#barrier: Promise<unknown> = Promise.resolve();
	/** Reads in flight since the barrier: pipelined on the one connection. */
	readonly #reads = new Set<Promise<unknown>>();
	#writeQueue: Promise<unknown> = Promise.resolve();
	#worker: WorkerIdentity | undefined;
	#reloads = 0;

	constructor(options: RuntimeClientOptions) {
		this.name = options.name ?? options.address;
		this.#options = {
			address: options.address,
			master: options.master ?? false,
			timeoutMs: options.timeoutMs ?? 10_000,
			bufsize: options.bufsize ?? DEFAULT_BUFSIZE,
			lockAttempts: options.lockAttempts ?? 10,
		};
	}

	/** The worker seen by the last connection, and how many worker changes (reloads) this client noticed. */
	get worker(): WorkerIdentity | undefined {
		return this.#worker;
	}
	get reloadsSeen(): number {
		return this.#reloads;
	}

	/**
	 * Runs one command and returns its answer (without prompt). `payload` is sent after `<<` and ended
	 * with an empty line; it must not contain empty lines. `read: true` marks a read-only command: reads
	 * are pipelined (written without waiting for earlier answers, HAProxy answers in order) and re-sent
	 * once on a fresh connection when the old one closed under them. Every other command runs alone.
	 */
	run(command: string, options: { payload?: string; read?: boolean } = {}): Promise<string> {
		let request: string;
		try {
			request = this.#request(command, options.payload);
		} catch (e) {
			return Promise.reject(e);
		}
		if (options.read === true && options.payload === undefined) {
			const task = this.#barrier.then(() => this.#send(request, true));
			const settled = task.catch(() => undefined);
			this.#reads.add(settled);
			void settled.then(() => this.#reads.delete(settled));
			return task;
		}
		const prior = [this.#barrier, ...this.#reads];
		this.#reads.clear();
		const task = Promise.all(prior).then(() => this.#send(request, false));
		this.#barrier = task.catch(() => undefined);
		return task;
	}

	/** Runs `fn` while no other certificate write of this client runs (one transaction per HAProxy). */
	exclusive<T>(fn: () => Promise<T>): Promise<T> {
		const task = this.#writeQueue.then(fn);
		this.#writeQueue = task.catch(() => undefined);
		return task;
	}

	/**
	 * Asks the worker who it is; reconnects when the connection talks to a stopping (old) worker or the
	 * master now routes to a new one. Returns the current worker. Cheap (one `show info`).
	 */
	async checkWorker(): Promise<WorkerIdentity> {
		const seen = identity(parseInfo(await this.run("show info", { read: true })));
		const known = this.#worker;
		if (seen.stopping || (known !== undefined && known.pid !== seen.pid)) {
			this.#connection?.close();
			this.#connection = undefined;
			if (seen.stopping) await this.run("show info", { read: true });
			else this.#noteWorker(seen);
		}
		return this.#worker ?? seen;
	}

	async close(): Promise<void> {
		await Promise.all([this.#barrier, ...this.#reads]);
		this.#connection?.close();
		this.#connection = undefined;
	}

	// --- typed operations -------------------------------------------------------------------------------

	async showInfo(): Promise<Record<string, string>> {
		return parseInfo(await this.run("show info", { read: true }));
	}

	/** `show ssl cert`: every name in the in-memory store, and the open transaction if any. */
	async showCerts(): Promise<CertList> {
		return parseCertList(await this.#ssl("show ssl cert", undefined, "show ssl cert", () => undefined, true));
	}

	/** `show ssl cert <name>`; undefined when HAProxy does not know the name. `*name` shows a transaction. */
	async showCert(name: string): Promise<CertDetail | undefined> {
		const text = await this.#ssl(
			`show ssl cert ${checkName(name, this.name)}`,
			undefined,
			name,
			() => undefined,
			true,
		);
		if (text.startsWith("Can't display the certificate")) return undefined;
		if (!text.startsWith("Filename:")) throw this.#failed("show ssl cert", name, firstLine(text));
		return parseCertDetail(text);
	}

	/** `set ssl cert <name>` with a PEM (normalised here). Checks the name HAProxy echoes (2.6.12 quirk). */
	async setCert(name: string, pem: string): Promise<"created" | "updated"> {
		const payload = normalisePem(pem);
		if (payload === "") throw this.#failed("set ssl cert", name, "the payload holds no PEM block");
		const text = await this.#ssl(`set ssl cert ${checkName(name, this.name)}`, payload, name, (t) =>
			expect.set(name, t),
		);
		return text.startsWith("Transaction created") ? "created" : "updated";
	}

	async commitCert(name: string): Promise<void> {
		await this.#ssl(`commit ssl cert ${checkName(name, this.name)}`, undefined, name, (t) =>
			expect.commit(name, t),
		);
	}

	/** `abort ssl cert <name>`; false when there was no transaction to abort. */
	async abortCert(name: string): Promise<boolean> {
		const text = await this.#ssl(`abort ssl cert ${checkName(name, this.name)}`, undefined, name, (t) =>
			t.startsWith("No ongoing transaction") ? undefined : expect.abort(name, t),
		);
		return !text.startsWith("No ongoing transaction");
	}

	async newCert(name: string): Promise<void> {
		await this.#ssl(`new ssl cert ${checkName(name, this.name)}`, undefined, name, (t) =>
			expect.new(name, t),
		);
	}

	async delCert(name: string): Promise<void> {
		await this.#ssl(`del ssl cert ${checkName(name, this.name)}`, undefined, name, (t) =>
			expect.del(name, t),
		);
	}

	/** `add ssl crt-list <list>`: a one-line payload when options or filters are given. */
	async addCrtListEntry(list: string, certPath: string, entry: CrtListEntryOptions = {}): Promise<void> {
		checkName(list, this.name);
		checkName(certPath, this.name);
		const parts = [certPath];
		if (entry.sslOptions) parts.push(`[${entry.sslOptions.replace(/[\]\n]/g, "")}]`);
		for (const f of entry.filters ?? []) parts.push(checkName(f, this.name));
		const check = (t: string) => expect.addCrtList(certPath, t);
		if (parts.length === 1)
			await this.#ssl(`add ssl crt-list ${list} ${certPath}`, undefined, certPath, check);
		else await this.#ssl(`add ssl crt-list ${list}`, `${parts.join(" ")}\n`, certPath, check);
	}

	/** `del ssl crt-list <list> <cert>[:line]`. */
	async delCrtListEntry(list: string, certPath: string, line?: number): Promise<void> {
		checkName(list, this.name);
		checkName(certPath, this.name);
		const target = line === undefined ? certPath : `${certPath}:${line}`;
		await this.#ssl(`del ssl crt-list ${list} ${target}`, undefined, certPath, (t) =>
			expect.delCrtList(certPath, t),
		);
	}

	/** `show ssl crt-list`: crt-list files and crt directories (named without trailing slash). */
	async showCrtLists(): Promise<string[]> {
		return parseCrtLists(
			await this.#ssl("show ssl crt-list", undefined, "show ssl crt-list", () => undefined, true),
		);
	}

	/** `show ssl crt-list -n <list>`: its entries with line numbers; undefined for an unknown list. */
	async showCrtList(list: string): Promise<CrtListEntry[] | undefined> {
		const text = await this.#ssl(
			`show ssl crt-list -n ${checkName(list, this.name)}`,
			undefined,
			list,
			() => undefined,
			true,
		);
		if (text.startsWith("didn't find the specified filename")) return undefined;
		return parseCrtList(text);
	}

	// --- internals --------------------------------------------------------------------------------------

	#request(command: string, payload: string | undefined): string {
		if (command.includes("\n")) throw new Error("RuntimeClient.run: a command is one line");
		const prefix = this.#options.master ? "@1 " : "";
		const request = payload === undefined ? `${prefix}${command}\n` : `${prefix}${command} <<\n${payload}\n`;
		if (payload !== undefined && /\n\n/.test(`\n${payload}`.replace(/\n$/, ""))) {
			throw this.#failed(
				command.split(" ").slice(0, 3).join(" "),
				undefined,
				"payload contains an empty line",
			);
		}
		const tooLarge = payloadTooLarge({
			size: Buffer.byteLength(request),
			bufsize: this.#options.bufsize,
			endpoint: this.name,
			operation: command.split(" ").slice(0, 3).join(" "),
		});
		if (tooLarge) throw tooLarge;
		return request;
	}

	async #send(request: string, retry: boolean): Promise<string> {
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
		this.#connecting ??= (async () => {
			const connection = await this.#open();
			const prefix = this.#options.master ? "@1 " : "";
			try {
				this.#noteWorker(
					identity(parseInfo(await connection.send(`${prefix}show info\n`, this.#options.timeoutMs))),
				);
			} catch (e) {
				connection.close();
				throw e;
			}
			this.#connection = connection;
			return connection;
		})().finally(() => {
			this.#connecting = undefined;
		});
		return this.#connecting;
	}

	/** Connects, retrying briefly: during a reload the master re-executes itself and refuses connections. */
	async #open(): Promise<Connection> {
		for (let attempt = 1; ; attempt++) {
			try {
				return await Connection.open(this.#options.address, this.name, this.#options.timeoutMs);
			} catch (e) {
				if (attempt >= CONNECT_ATTEMPTS || !isCertificateeError(e, "ENDPOINT_UNAVAILABLE")) throw e;
				await sleep(50 * 2 ** attempt);
			}
		}
	}

	#noteWorker(seen: WorkerIdentity): void {
		if (this.#worker !== undefined && this.#worker.pid !== seen.pid) this.#reloads += 1;
		this.#worker = seen;
	}

	/** Runs a certificate command, retrying while HAProxy's certificate lock is held. */
	async #ssl(
		command: string,
		payload: string | undefined,
		subject: string,
		check: (text: string) => string | undefined,
		read = false,
	): Promise<string> {
		const operation = command.split(" ").slice(0, 3).join(" ");
		for (let attempt = 1; ; attempt++) {
			const text = await this.run(command, { payload, read });
			if (isLocked(text)) {
				if (attempt >= this.#options.lockAttempts) {
					throw new CertificateeError(
						"RUNTIME_LOCKED",
						`${operation} on ${this.name}: certificate operations stayed locked after ${attempt} attempts`,
						{
							context: { endpoint: this.name, certificate: subject, operation },
							retryable: true,
							hint: "another commit (or HAProxy's ACME updater) holds the certificate lock; retry later",
						},
					);
				}
				await sleep(Math.min(2 ** attempt * 5, 500) * (0.5 + Math.random()));
				continue;
			}
			if (text.startsWith("Permission denied")) {
				throw this.#failed(operation, subject, "Permission denied", "the stats socket needs `level admin`");
			}
			const problem = check(text);
			if (problem !== undefined)
				throw this.#failed(operation, subject, problem, undefined, refusalCode(operation, text));
			return text;
		}
	}

	#failed(
		operation: string,
		subject: string | undefined,
		answer: string,
		hint?: string,
		code: ErrorCode = "RUNTIME_COMMAND_FAILED",
	): CertificateeError {
		return new CertificateeError(
			code,
			`${operation}${subject ? ` ${subject}` : ""} on ${this.name} failed: ${scrubSecrets(answer)}`,
			{ context: { endpoint: this.name, certificate: subject, operation }, hint },
		);
	}
}

function identity(info: Record<string, string>): WorkerIdentity {
	return {
		...(info.Node ? { node: info.Node } : {}),
		pid: Number(info.Pid ?? 0),
		uptimeSec: Number(info.Uptime_sec ?? 0),
		stopping: info.Stopping === "1",
	};
}

function checkName(name: string, endpoint: string): string {
	if (!SAFE_NAME.test(name)) {
		throw new CertificateeError(
			"RUNTIME_COMMAND_FAILED",
			`refused an unsafe certificate or crt-list name for ${endpoint}`,
			{
				context: { endpoint, certificate: name.replace(/[\s\0]/g, "?"), operation: "validate name" },
				hint: "names may not contain whitespace, NUL, '<', '>', ';' or '#'",
			},
		);
	}
	return name;
}
