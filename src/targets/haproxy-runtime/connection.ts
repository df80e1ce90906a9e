/**
 * One persistent prompt-mode connection to HAProxy's CLI (worker stats socket or master CLI).
 * Framing: every answer ends with the prompt (`> `, `master> `, `<pid>> `) at the start of a line; that is
 * the only robust delimiter. HAProxy answers requests in order, so several one-line requests may be in
 * flight (pipelining); the owner sends payload requests alone. Leading `+ ` continuation prompts are
 * stripped. The connection closes itself on EOF (HAProxy's `stats timeout`, a reload) and on timeouts;
 * the owner reconnects.
 *
 * Pipelining is bounded: at most `window.requests` requests (and `window.bytes` bytes of them) are written
 * and unanswered at once; the rest wait here and go out as answers come in. HAProxy 3.2.0's CLI spins when
 * its output buffer (one tune.bufsize) is full while requests wait in its input, until the watchdog kills
 * the worker (fixed after 3.2.0: "BUG/MEDIUM: cli: Don't consume data if outbuf is full or not available");
 * with a window whose answers fit in one buffer, it never gets there. Answers are budgeted at 2 KB until a
 * larger one comes; from then on the window holds as many as fit at that size.
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
	bytes: number;
}

interface Queued {
	request: string;
	bytes: number;
	timeoutMs: number;
	resolve(text: string): void;
	reject(e: Error): void;
}

/** How many requests may be written and unanswered at once. */
export interface Window {
	requests: number;
	/** Bytes of those requests together (a lone larger request still goes out, alone). */
	bytes: number;
	/**
	 * HAProxy's output buffer (tune.bufsize): once an answer larger than ANSWER_BUDGET has come (a certificate
	 * with many names or a long chain), `requests` shrinks so that many answers that large fit in it.
	 */
	output: number;
}

/** Bytes budgeted per answer: a `show ssl cert <name>` with a chain, the commonest pipelined read, is 1-2 KB. */
const ANSWER_BUDGET = 2_048;

/**
 * The window for a CLI whose buffers are `bufsize` bytes (tune.bufsize): as many requests as their answers,
 * at ANSWER_BUDGET each, fit in one output buffer (8 at HAProxy's default 16384), and requests filling at
 * most half an input buffer. At least one.
 */
export function windowFor(bufsize: number): Window {
	return {
		requests: answersFitting(bufsize, ANSWER_BUDGET),
		bytes: Math.max(1, Math.floor(bufsize / 2)),
		output: bufsize,
	};
}

/** How many answers of `answerBytes` fit in an output buffer of `output` bytes: at least one. */
function answersFitting(output: number, answerBytes: number): number {
	return Math.max(1, Math.floor(output / Math.max(ANSWER_BUDGET, answerBytes)));
}

export class Connection {
	readonly #socket: Socket;
	readonly #decoder = new StringDecoder("utf8");
	readonly #endpoint: string;
	#buffer = "";
	/** Requests written and not answered, oldest first. */
	readonly #pending: Pending[] = [];
	/** Requests not written yet: the window is full. */
	readonly #queued: Queued[] = [];
	readonly #window: Window;
	#pendingBytes = 0;
	/** Requests allowed unanswered now: the window's, fewer once answers larger than budgeted have come. */
	#requests: number;
	#closed = false;

	private constructor(socket: Socket, endpoint: string, window: Window) {
		this.#socket = socket;
		this.#endpoint = endpoint;
		this.#window = window;
		this.#requests = window.requests;
		socket.on("data", (chunk: Buffer) => this.#onData(chunk));
		socket.on("close", () => this.#fail("connection closed by HAProxy"));
		socket.on("error", (e) => this.#fail(`socket error: ${e.message}`));
	}

	/** Connects and switches to prompt mode. */
	static async open(
		address: string,
		endpoint: string,
		timeoutMs: number,
		window: Window = windowFor(16_384),
	): Promise<Connection> {
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
		const connection = new Connection(socket, endpoint, window);
		await connection.send("prompt\n", timeoutMs);
		return connection;
	}

	get closed(): boolean {
		return this.#closed;
	}

	/** Requests not answered yet (written, or waiting for room in the window). */
	get inFlight(): number {
		return this.#pending.length + this.#queued.length;
	}

	/** The most requests written and unanswered at once so far (at most the window's). */
	get deepest(): number {
		return this.#deepest;
	}
	#deepest = 0;

	/**
	 * Sends one request, in order, once the window has room, and resolves with its answer (prompt and `+ `
	 * prefixes removed). Its timeout runs from when it is written.
	 */
	send(request: string, timeoutMs: number): Promise<string> {
		if (this.#closed) return Promise.reject(unavailable(this.#endpoint, "connection already closed"));
		return new Promise<string>((resolve, reject) => {
			this.#queued.push({ request, bytes: Buffer.byteLength(request), timeoutMs, resolve, reject });
			this.#drain();
		});
	}

	/** Writes queued requests while the window has room (always one when nothing is in flight). */
	#drain(): void {
		for (;;) {
			const next = this.#queued[0];
			if (next === undefined || this.#closed) return;
			const full =
				this.#pending.length >= this.#requests || this.#pendingBytes + next.bytes > this.#window.bytes;
			if (this.#pending.length > 0 && full) return;
			this.#queued.shift();
			const timer = setTimeout(() => {
				this.#fail(`no answer within ${next.timeoutMs} ms`, "ENDPOINT_TIMEOUT");
			}, next.timeoutMs);
			this.#pending.push({ resolve: next.resolve, reject: next.reject, timer, bytes: next.bytes });
			this.#pendingBytes += next.bytes;
			this.#deepest = Math.max(this.#deepest, this.#pending.length);
			this.#socket.write(next.request);
		}
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
			this.#pendingBytes -= pending.bytes;
			this.#requests = Math.min(
				this.#requests,
				answersFitting(this.#window.output, Buffer.byteLength(answer) + match[0].length),
			);
			pending.resolve(stripContinuationPrompts(answer));
			this.#drain();
		}
	}

	#fail(reason: string, code: "ENDPOINT_UNAVAILABLE" | "ENDPOINT_TIMEOUT" = "ENDPOINT_UNAVAILABLE"): void {
		const wasClosed = this.#closed;
		this.#closed = true;
		if (!wasClosed) this.#socket.destroy();
		this.#pendingBytes = 0;
		for (const pending of this.#pending.splice(0)) {
			clearTimeout(pending.timer);
			pending.reject(unavailable(this.#endpoint, reason, code));
		}
		for (const queued of this.#queued.splice(0)) queued.reject(unavailable(this.#endpoint, reason, code));
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
