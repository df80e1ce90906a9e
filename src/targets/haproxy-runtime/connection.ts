/**
 * One persistent prompt-mode connection to HAProxy's CLI (worker stats socket or master CLI).
 * Framing: every answer ends with the prompt (`> `, `master> `, `<pid>> `) at the start of a line; that is
 * the only robust delimiter. HAProxy answers requests in order, so several one-line requests may be in
 * flight (pipelining); the owner sends payload requests alone. Leading `+ ` continuation prompts are
 * stripped. The connection closes itself on EOF (HAProxy's `stats timeout`, a reload) and on timeouts;
 * the owner reconnects.
 */
import { createConnection, type Socket } from "node:net";
import { StringDecoder } from "node:string_decoder";
import { parseAddress } from "../../base/address.js";
import { CertificateeError } from "../../errors.js";
import { stripContinuationPrompts } from "./parse.js";

// End of an answer: the prompt, at the start of a line.
const PROMPT = /(?:^|\n)(?:master|\d+)?(?:\[[^\]\n]*\])?> /;

interface Pending {
	resolve(text: string): void;
	reject(e: Error): void;
	timer: NodeJS.Timeout;
}

export class Connection {
	readonly #socket: Socket;
	readonly #decoder = new StringDecoder("utf8");
	readonly #endpoint: string;
	#buffer = "";
	/** Requests in flight, oldest first. */
	readonly #pending: Pending[] = [];
	#closed = false;

	private constructor(socket: Socket, endpoint: string) {
		this.#socket = socket;
		this.#endpoint = endpoint;
		socket.on("data", (chunk: Buffer) => this.#onData(chunk));
		socket.on("close", () => this.#fail("connection closed by HAProxy"));
		socket.on("error", (e) => this.#fail(`socket error: ${e.message}`));
	}

	/** Connects and switches to prompt mode. */
	static async open(address: string, endpoint: string, timeoutMs: number): Promise<Connection> {
		const target = parseAddress(address);
		const socket =
			"path" in target ? createConnection(target.path) : createConnection(target.port, target.host);
		await new Promise<void>((resolve, reject) => {
			const timer = setTimeout(() => {
				socket.destroy();
				reject(unavailable(endpoint, `connect timed out after ${timeoutMs} ms`, "ENDPOINT_TIMEOUT"));
			}, timeoutMs);
			socket.once("connect", () => {
				clearTimeout(timer);
				resolve();
			});
			socket.once("error", (e) => {
				clearTimeout(timer);
				reject(unavailable(endpoint, `cannot connect to ${address}: ${e.message}`));
			});
		});
		socket.setNoDelay(true);
		const connection = new Connection(socket, endpoint);
		await connection.send("prompt\n", timeoutMs);
		return connection;
	}

	get closed(): boolean {
		return this.#closed;
	}

	/** Requests written and not answered yet. */
	get inFlight(): number {
		return this.#pending.length;
	}

	/** Writes one request and resolves with its answer (prompt and `+ ` prefixes removed). */
	send(request: string, timeoutMs: number): Promise<string> {
		if (this.#closed) return Promise.reject(unavailable(this.#endpoint, "connection already closed"));
		return new Promise<string>((resolve, reject) => {
			const timer = setTimeout(() => {
				this.#fail(`no answer within ${timeoutMs} ms`, "ENDPOINT_TIMEOUT");
			}, timeoutMs);
			this.#pending.push({ resolve, reject, timer });
			this.#socket.write(request);
		});
	}

	close(): void {
		this.#closed = true;
		this.#socket.destroy();
	}

	#onData(chunk: Buffer): void {
		this.#buffer += this.#decoder.write(chunk);
		for (;;) {
			const match = PROMPT.exec(this.#buffer);
			if (!match) return;
			const answer = this.#buffer.slice(0, match.index + (match[0].startsWith("\n") ? 1 : 0));
			this.#buffer = this.#buffer.slice(match.index + match[0].length);
			const pending = this.#pending.shift();
			if (!pending) {
				this.#fail("HAProxy sent an answer nobody asked for");
				return;
			}
			clearTimeout(pending.timer);
			pending.resolve(stripContinuationPrompts(answer));
		}
	}

	#fail(reason: string, code: "ENDPOINT_UNAVAILABLE" | "ENDPOINT_TIMEOUT" = "ENDPOINT_UNAVAILABLE"): void {
		const wasClosed = this.#closed;
		this.#closed = true;
		if (!wasClosed) this.#socket.destroy();
		for (const pending of this.#pending.splice(0)) {
			clearTimeout(pending.timer);
			pending.reject(unavailable(this.#endpoint, reason, code));
		}
	}
}

function unavailable(
	endpoint: string,
	reason: string,
	code: "ENDPOINT_UNAVAILABLE" | "ENDPOINT_TIMEOUT" = "ENDPOINT_UNAVAILABLE",
): CertificateeError {
	return new CertificateeError(code, `HAProxy runtime socket of ${endpoint}: ${reason}`, {
		context: { endpoint },
		retryable: true,
		hint: "check that HAProxy runs and that its stats socket (level admin) is reachable at the configured address",
	});
}
