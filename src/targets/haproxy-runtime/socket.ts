/**
 * HAProxy runtime API client for certificates over one persistent prompt-mode connection.
 *
 * - Worker stats socket (`level admin`) or master CLI (`master: true`: every command is prefixed `@1 `,
 *   so it always reaches the current worker; the master drops the connection on reload).
 * - The connection, command order and reload detection live in session.ts; requests and the meaning of
 *   answers in command.ts (pure); the parsing of `show` answers in parse.ts (pure). This file names the
 *   operations and retries while certificates are locked.
 * - Failures are recognised from HAProxy's exact texts and thrown as CertificateeError:
 *   RUNTIME_COMMAND_FAILED, RUNTIME_CERT_IN_USE (`del ssl cert` of a certificate still used), RUNTIME_LOCKED
 *   (after retries with backoff), RUNTIME_PAYLOAD_TOO_LARGE
 *   (never sent: a request of tune.bufsize bytes or more makes HAProxy 2.6-3.2 spin and exit),
 *   ENDPOINT_UNAVAILABLE / ENDPOINT_TIMEOUT.
 * - `exclusive()` serialises multi-command certificate writes (HAProxy has one transaction per process).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { CertificateeError, ErrorCode } from "../../errors.js";
import { DEFAULT_BUFSIZE } from "../haproxy/bufsize.js";
import {
	addCrtListCommand,
	type CrtListEntryOptions,
	checkName,
	commandFailed,
	type Framing,
	frameRequest,
	lockBackoffMs,
	operationOf,
	readAnswer,
	stayedLocked,
} from "./command.js";
import {
	type CertDetail,
	type CertList,
	type CrtListEntry,
	expect,
	firstLine,
	normalisePem,
	parseAcmeStatus,
	parseCertDetail,
	parseCertList,
	parseCrtList,
	parseCrtLists,
	parseInfo,
	refusalCode,
} from "./parse.js";
import { RuntimeSession, type WorkerIdentity, workerIdentity } from "./session.js";

export type { CrtListEntryOptions } from "./command.js";
export type { WorkerIdentity } from "./session.js";

export interface RuntimeClientOptions {
	/** Unix socket path or host:port. */
	address: string;
	/** The address is the master CLI (`-S`): commands go to the current worker through `@1`. */
	master?: boolean;
	/** Name used in errors (the endpoint's config name). Default: the address. */
	name?: string;
	/** Per-command timeout. Default 10 s. */
	timeoutMs?: number;
	/** HAProxy's tune.bufsize: requests of this size or more are refused, and it sizes the window of
	 * pipelined requests left unanswered at once (8 at 16384). Default 16384. */
	bufsize?: number;
	/** Attempts while HAProxy answers "Operations on certificates are currently locked!" (backoff from
	 * 10 ms doubling to 500 ms, jittered). Default 10: about 2 s in all. */
	lockAttempts?: number;
	/**
	 * Where HAProxy's processes can be seen (a Unix socket), a refused connect waits while a reload of the worker
	 * last met is under way, up to `timeoutMs` (session.ts). Default true; the Data Plane API double sets false,
	 * as client-native gives up on a refused connect.
	 */
	reloadWait?: boolean;
}

/** One certificate command: what to send, what it concerns, and which answers mean success. */
interface SslCommand {
	command: string;
	payload?: string;
	/** The certificate or list it concerns, for errors. */
	subject: string;
	/** An error text for an answer that is not success; undefined for success. Default: any answer. */
	check?: (text: string) => string | undefined;
	read?: boolean;
}

const anyAnswer = () => undefined;

export class RuntimeClient {
	readonly name: string;
	readonly #session: RuntimeSession;
	readonly #framing: Framing;
	readonly #lockAttempts: number;

	constructor(options: RuntimeClientOptions) {
		this.name = options.name ?? options.address;
		const master = options.master ?? false;
		const bufsize = options.bufsize ?? DEFAULT_BUFSIZE;
		this.#session = new RuntimeSession({
			address: options.address,
			master,
			name: this.name,
			timeoutMs: options.timeoutMs ?? 10_000,
			bufsize,
			...(options.reloadWait === undefined ? {} : { reloadWait: options.reloadWait }),
		});
		this.#framing = { master, bufsize, endpoint: this.name };
		this.#lockAttempts = options.lockAttempts ?? 10;
	}

	/** The worker seen by the last connection, and how many worker changes (reloads) this client noticed. */
	get worker(): WorkerIdentity | undefined {
		return this.#session.worker;
	}
	get reloadsSeen(): number {
		return this.#session.reloadsSeen;
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
			request = frameRequest(command, options.payload, this.#framing);
		} catch (e) {
			return Promise.reject(e);
		}
		return this.#session.send(request, options.read === true && options.payload === undefined);
	}

	/** Runs `fn` while no other certificate write of this client runs (one transaction per HAProxy). */
	exclusive<T>(fn: () => Promise<T>): Promise<T> {
		return this.#session.exclusive(fn);
	}

	/**
	 * Asks the worker who it is; reconnects when the connection talks to a stopping (old) worker or the
	 * master now routes to a new one. Returns the current worker. Cheap (one `show info`).
	 */
	async checkWorker(): Promise<WorkerIdentity> {
		const seen = workerIdentity(parseInfo(await this.run("show info", { read: true })));
		if (this.#session.followWorker(seen) && seen.stopping) await this.run("show info", { read: true });
		return this.#session.worker ?? seen;
	}

	close(): Promise<void> {
		return this.#session.close();
	}

	// --- typed operations -------------------------------------------------------------------------------

	async showInfo(): Promise<Record<string, string>> {
		return parseInfo(await this.run("show info", { read: true }));
	}

	/** `show ssl cert`: every name in the in-memory store, and the open transaction if any. */
	async showCerts(): Promise<CertList> {
		return parseCertList(await this.#ssl({ command: "show ssl cert", subject: "show ssl cert", read: true }));
	}

	/** `show ssl cert <name>`; undefined when HAProxy does not know the name. `*name` shows a transaction. */
	async showCert(name: string): Promise<CertDetail | undefined> {
		const command = `show ssl cert ${checkName(name, this.name)}`;
		const text = await this.#ssl({ command, subject: name, read: true });
		if (text.startsWith("Can't display the certificate")) return undefined;
		if (!text.startsWith("Filename:")) throw this.#failed("show ssl cert", name, firstLine(text));
		return parseCertDetail(text);
	}

	/** `set ssl cert <name>` with a PEM (normalised here). Checks the name HAProxy echoes (2.6.12 quirk). */
	async setCert(name: string, pem: string): Promise<"created" | "updated"> {
		const payload = normalisePem(pem);
		if (payload === "") throw this.#failed("set ssl cert", name, "the payload holds no PEM block");
		const command = `set ssl cert ${checkName(name, this.name)}`;
		const text = await this.#ssl({ command, payload, subject: name, check: (t) => expect.set(name, t) });
		return text.startsWith("Transaction created") ? "created" : "updated";
	}

	/**
	 * `set ssl cert` and `commit ssl cert` written back to back (one transaction;
	 * docs/haproxy-runtime-target.md): true when both succeeded. false when either did not (locked, another transaction open, refused):
	 * the caller then aborts what is left open and writes the careful way (setCert, then commitCert). A request
	 * that cannot be sent (too large, unsafe name) throws as setCert would.
	 */
	async setAndCommit(name: string, pem: string): Promise<boolean> {
		const payload = normalisePem(pem);
		if (payload === "") throw this.#failed("set ssl cert", name, "the payload holds no PEM block");
		const safe = checkName(name, this.name);
		const requests = [
			frameRequest(`set ssl cert ${safe}`, payload, this.#framing),
			frameRequest(`commit ssl cert ${safe}`, undefined, this.#framing),
		];
		const [set = "", commit = ""] = await this.#session.sendTogether(requests);
		return (
			readAnswer(set, (t) => expect.set(name, t)).kind === "ok" &&
			readAnswer(commit, (t) => expect.commit(name, t)).kind === "ok"
		);
	}

	async commitCert(name: string): Promise<void> {
		const command = `commit ssl cert ${checkName(name, this.name)}`;
		await this.#ssl({ command, subject: name, check: (t) => expect.commit(name, t) });
	}

	/** `abort ssl cert <name>`; false when there was no transaction to abort. */
	async abortCert(name: string): Promise<boolean> {
		const command = `abort ssl cert ${checkName(name, this.name)}`;
		const none = (t: string) => t.startsWith("No ongoing transaction");
		const text = await this.#ssl({
			command,
			subject: name,
			check: (t) => (none(t) ? undefined : expect.abort(name, t)),
		});
		return !none(text);
	}

	async newCert(name: string): Promise<void> {
		const command = `new ssl cert ${checkName(name, this.name)}`;
		await this.#ssl({ command, subject: name, check: (t) => expect.new(name, t) });
	}

	async delCert(name: string): Promise<void> {
		const command = `del ssl cert ${checkName(name, this.name)}`;
		await this.#ssl({ command, subject: name, check: (t) => expect.del(name, t) });
	}

	/** `add ssl crt-list <list>`: a one-line payload when options or filters are given. */
	async addCrtListEntry(list: string, certPath: string, entry: CrtListEntryOptions = {}): Promise<void> {
		const request = addCrtListCommand(list, certPath, entry, this.name);
		await this.#ssl({ ...request, subject: certPath, check: (t) => expect.addCrtList(certPath, t) });
	}

	/** `del ssl crt-list <list> <cert>[:line]`. */
	async delCrtListEntry(list: string, certPath: string, line?: number): Promise<void> {
		checkName(list, this.name);
		checkName(certPath, this.name);
		const target = line === undefined ? certPath : `${certPath}:${line}`;
		const command = `del ssl crt-list ${list} ${target}`;
		await this.#ssl({ command, subject: certPath, check: (t) => expect.delCrtList(certPath, t) });
	}

	/** `acme status` (3.2+): certificate name -> acme section; an empty map when HAProxy has no such command. */
	async acmeStatus(): Promise<Map<string, string>> {
		return parseAcmeStatus(await this.run("acme status", { read: true })) ?? new Map();
	}

	/** `show ssl crt-list`: crt-list files and crt directories (named without trailing slash). */
	async showCrtLists(): Promise<string[]> {
		const command = "show ssl crt-list";
		return parseCrtLists(await this.#ssl({ command, subject: command, read: true }));
	}

	/** `show ssl crt-list -n <list>`: its entries with line numbers; undefined for an unknown list. */
	async showCrtList(list: string): Promise<CrtListEntry[] | undefined> {
		const command = `show ssl crt-list -n ${checkName(list, this.name)}`;
		const text = await this.#ssl({ command, subject: list, read: true });
		if (text.startsWith("didn't find the specified filename")) return undefined;
		return parseCrtList(text);
	}

	// --- internals --------------------------------------------------------------------------------------

	/** Runs a certificate command, retrying while HAProxy's certificate lock is held. */
	async #ssl({ command, payload, subject, check = anyAnswer, read = false }: SslCommand): Promise<string> {
		const operation = operationOf(command);
		for (let attempt = 1; ; attempt++) {
			const text = await this.run(command, { payload, read });
			const answer = readAnswer(text, check);
			switch (answer.kind) {
				case "ok":
					return answer.text;
				case "locked":
					if (attempt >= this.#lockAttempts) throw stayedLocked(this.name, operation, subject, attempt);
					await sleep(lockBackoffMs(attempt, Math.random()));
					break;
				case "denied":
					throw this.#failed(operation, subject, "Permission denied", "the stats socket needs `level admin`");
				case "failed":
					throw this.#failed(operation, subject, answer.problem, undefined, refusalCode(operation, text));
			}
		}
	}

	#failed(
		operation: string,
		subject: string | undefined,
		answer: string,
		hint?: string,
		code: ErrorCode = "RUNTIME_COMMAND_FAILED",
	): CertificateeError {
		return commandFailed(this.name, operation, subject, answer, hint, code);
	}
}
