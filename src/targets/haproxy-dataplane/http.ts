/**
 * One HTTP exchange with a Data Plane API server, and the retry loop around it. Everything that can go
 * wrong on the wire becomes a CertificateeError naming the endpoint, the operation and the status.
 */
import { setMaxListeners } from "node:events";
import { readFileSync } from "node:fs";
import { Pool } from "undici";
import type { z } from "zod";
import { readBodyCapped } from "../../base/body.js";
import { formatByteSize } from "../../base/size.js";
import { CertificateeError, type ErrorCode, scrubSecrets } from "../../errors.js";
import { errorBodySchema } from "./schema.js";

export interface HttpOptions {
	endpoint: string;
	url: string;
	username: string;
	password: string;
	caFile?: string;
	insecureSkipVerify: boolean;
	/** The whole exchange, headers and body, per attempt (a server trickling bytes never resets it). */
	timeoutMs: number;
	/** The largest response body read; a larger one is ENDPOINT_RESPONSE_TOO_LARGE and the connection dropped. */
	maxResponseBytes: number;
}

export interface RetryPolicy {
	/** Attempts in all, the first included. */
	attempts: number;
	/** First backoff; doubled per attempt, jittered by ±50 %. */
	baseMs: number;
	maxMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { attempts: 3, baseMs: 200, maxMs: 5_000 };

/** Randomness and time are passed in, so tests and the daemon decide them. */
export interface HttpDeps {
	sleep(ms: number, signal: AbortSignal): Promise<void>;
	random(): number;
	retry: RetryPolicy;
}

export interface Exchange {
	operation: string;
	method: "GET" | "POST" | "PUT" | "DELETE";
	/** Path below /v3, with its query string. */
	path: string;
	body?: { contentType: string; data: string };
	/** Reads may be repeated after any transient failure; writes only when the server surely did nothing. */
	read: boolean;
	/** The code of an error status whose message says more than the status (HAProxy's refusals arrive as 500). */
	refusal?: (message: string) => ErrorCode | undefined;
}

export interface Reply {
	status: number;
	headers: Record<string, string | string[] | undefined>;
	text: string;
}

/** What a failed attempt allows: `safe` = the server surely did nothing, `transient` = it might have. */
type Retry = "safe" | "transient" | "never";

class AttemptError extends Error {
	constructor(
		readonly error: CertificateeError,
		readonly retry: Retry,
	) {
		super(error.message);
	}
}

export interface HttpClient {
	/** Sends the exchange (retrying where safe) and hands the reply to `accept`, which may throw. */
	call<T>(exchange: Exchange, accept: (reply: Reply) => T, signal: AbortSignal): Promise<T>;
	close(): Promise<void>;
}

function readCa(options: HttpOptions): string | undefined {
	if (options.caFile === undefined) return undefined;
	try {
		return readFileSync(options.caFile, "utf8");
	} catch (cause) {
		throw new CertificateeError("CONFIG_INVALID", `endpoint ${options.endpoint}: cannot read ca_file`, {
			context: { endpoint: options.endpoint, file: options.caFile, field: "ca_file" },
			hint: "ca_file must be a readable PEM bundle of the CAs that sign the API's HTTPS certificate",
			cause,
		});
	}
}

export function createHttpClient(options: HttpOptions, deps: HttpDeps): HttpClient {
	const ca = readCa(options);
	// One pool for the endpoint's origin: no URL parsing or origin lookup per request (observe sends thousands).
	const base = new URL(options.url.replace(/\/+$/, ""));
	const prefix = base.pathname.replace(/\/+$/, "");
	const pool = new Pool(base.origin, {
		connect: { ...(ca === undefined ? {} : { ca }), rejectUnauthorized: !options.insecureSkipVerify },
		// A reset socket must not be silently reused for a write.
		pipelining: 1,
		// Idle timers besides the attempt's deadline (they free a connection the deadline already gave up on).
		headersTimeout: options.timeoutMs,
		bodyTimeout: options.timeoutMs,
	});
	const authorization = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString("base64")}`;

	// undici listens for "abort" on a request's signal while the request runs: hundreds of GETs in flight would
	// pile listeners onto the caller's signal (and warn). One signal of this client's own follows each caller
	// signal (AbortSignal.any adds no listener to its source), with no listener limit.
	const followers = new WeakMap<AbortSignal, AbortSignal>();
	const follow = (signal: AbortSignal): AbortSignal => {
		let own = followers.get(signal);
		if (own === undefined) {
			own = AbortSignal.any([signal]);
			setMaxListeners(0, own);
			followers.set(signal, own);
		}
		return own;
	};

	async function attempt(exchange: Exchange, signal: AbortSignal): Promise<Reply> {
		// undici's own timers are idle timers: a server sending a byte a second resets them forever. The deadline
		// bounds the attempt as a whole, and is told apart from the caller's abort by its own controller.
		const deadline = new AbortController();
		const timer = setTimeout(() => deadline.abort(), options.timeoutMs);
		try {
			const res = await pool.request({
				path: `${prefix}/v3${exchange.path}`,
				method: exchange.method,
				headers: {
					authorization,
					accept: "application/json",
					...(exchange.body ? { "content-type": exchange.body.contentType } : {}),
				},
				...(exchange.body ? { body: exchange.body.data } : {}),
				signal: AbortSignal.any([follow(signal), deadline.signal]),
			});
			const text = await readBodyCapped(res, options.maxResponseBytes);
			if (text === undefined)
				throw tooLarge(options.endpoint, exchange, res.statusCode, options.maxResponseBytes);
			return { status: res.statusCode, headers: res.headers, text };
		} catch (cause) {
			if (signal.aborted) throw cause;
			if (cause instanceof AttemptError) throw cause;
			const timedOut = deadline.signal.aborted || TIMEOUT_CODES.has(causeCode(cause));
			throw transportFailure(options.endpoint, exchange, cause, timedOut);
		} finally {
			clearTimeout(timer);
		}
	}

	async function call<T>(exchange: Exchange, accept: (reply: Reply) => T, signal: AbortSignal): Promise<T> {
		for (let n = 1; ; n++) {
			try {
				const reply = await attempt(exchange, signal);
				return acceptReply(options.endpoint, exchange, reply, accept);
			} catch (e) {
				if (!(e instanceof AttemptError)) throw e;
				const allowed = e.retry === "safe" || (e.retry === "transient" && exchange.read);
				if (!allowed || n >= deps.retry.attempts) throw e.error;
				const backoff = Math.min(deps.retry.maxMs, deps.retry.baseMs * 2 ** (n - 1));
				await deps.sleep(backoff * (0.5 + deps.random()), signal);
			}
		}
	}

	return { call, close: () => pool.close() };
}

function tooLarge(endpoint: string, exchange: Exchange, status: number, max: number): AttemptError {
	return new AttemptError(
		new CertificateeError(
			"ENDPOINT_RESPONSE_TOO_LARGE",
			`${where(endpoint, exchange)} (${status}): the answer is larger than max_response_size (${formatByteSize(max)}); not read further`,
			{
				context: { endpoint, operation: exchange.operation, status },
				hint: "is the URL a Data Plane API server? If the fleet is that large, raise the endpoint's max_response_size",
			},
		),
		// The server sends the same again.
		"never",
	);
}

function where(endpoint: string, exchange: Exchange): string {
	return `endpoint ${endpoint}: ${exchange.operation}`;
}

function causeCode(cause: unknown): string {
	if (typeof cause !== "object" || cause === null) return "";
	const own = (cause as { code?: unknown }).code;
	if (typeof own === "string" && own !== "UND_ERR_SOCKET") return own;
	const inner = (cause as { cause?: unknown }).cause;
	return inner === undefined ? (typeof own === "string" ? own : "") : causeCode(inner) || String(own ?? "");
}

/** undici's errors when the server kept the answer (or its body) longer than the endpoint's timeout. */
const TIMEOUT_CODES = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);
const TLS_CODES = /CERT|SELF_SIGNED|UNABLE_TO|ERR_TLS|HOSTNAME|ALTNAME/;

function transportFailure(
	endpoint: string,
	exchange: Exchange,
	cause: unknown,
	timedOut: boolean,
): AttemptError {
	const context = { endpoint, operation: exchange.operation };
	if (timedOut) {
		return new AttemptError(
			new CertificateeError("ENDPOINT_TIMEOUT", `${where(endpoint, exchange)}: no answer in time`, {
				context,
				retryable: true,
				hint: "the Data Plane API did not answer within the endpoint's timeout; raise `timeout` if it is slow",
				cause,
			}),
			"transient",
		);
	}
	const code = causeCode(cause);
	if (TLS_CODES.test(code)) {
		return new AttemptError(
			new CertificateeError(
				"ENDPOINT_UNAVAILABLE",
				`${where(endpoint, exchange)}: HTTPS verification failed (${code})`,
				{
					context,
					hint: "set ca_file to the CA bundle that signs the API's certificate (insecure_skip_verify only for tests)",
					cause,
				},
			),
			"never",
		);
	}
	const message = `${where(endpoint, exchange)}: connection failed (${code || describe(cause)})`;
	return new AttemptError(
		new CertificateeError("ENDPOINT_UNAVAILABLE", message, { context, retryable: true, cause }),
		NOT_SENT.has(code) ? "safe" : "transient",
	);
}

function describe(cause: unknown): string {
	return cause instanceof Error ? scrubSecrets(cause.message) : "unknown error";
}

function acceptReply<T>(endpoint: string, exchange: Exchange, reply: Reply, accept: (reply: Reply) => T): T {
	if (reply.status >= 200 && reply.status < 300) {
		try {
			return accept(reply);
		} catch (e) {
			if (e instanceof CertificateeError) throw new AttemptError(e, "never");
			throw e;
		}
	}
	const { error, retry } = statusFailure(endpoint, exchange, reply);
	throw new AttemptError(error, retry);
}

const STATUS_CODES: Record<number, ErrorCode> = {
	401: "ENDPOINT_AUTH",
	403: "ENDPOINT_AUTH",
	404: "ENDPOINT_NOT_FOUND",
	409: "ENDPOINT_CONFLICT",
};

/** The server's `message`, scrubbed (a failed runtime `set` echoes the whole socket command, key included). */
export function serverMessage(reply: Reply): string | undefined {
	try {
		const parsed = errorBodySchema.safeParse(JSON.parse(reply.text));
		const message = parsed.success ? parsed.data.message : undefined;
		return message ? scrubSecrets(message).slice(0, 500) : undefined;
	} catch {
		return undefined;
	}
}

function statusFailure(
	endpoint: string,
	exchange: Exchange,
	reply: Reply,
): { error: CertificateeError; retry: Retry } {
	const context = { endpoint, operation: exchange.operation, status: reply.status };
	const message = serverMessage(reply);
	const said = message === undefined ? "" : `: ${message}`;
	const text = `${where(endpoint, exchange)} answered ${reply.status}${said}`;
	const refused = message === undefined ? undefined : exchange.refusal?.(message);
	const code = STATUS_CODES[reply.status] ?? refused ?? "ENDPOINT_ERROR";
	// HAProxy refused before doing anything: repeating is safe even for a write.
	const locked = message !== undefined && /currently locked/i.test(message);
	const transient = reply.status === 429 || reply.status >= 500;
	const hint =
		code === "ENDPOINT_AUTH"
			? "check the endpoint's username and password (the Data Plane API userlist)"
			: locked
				? "HAProxy was busy with another certificate transaction; certificatee retries"
				: undefined;
	return {
		error: new CertificateeError(code, text, {
			context,
			retryable: transient,
			...(hint ? { hint } : {}),
		}),
		// A refusal the message names is the server's answer, not a hiccup: asking again gets the same.
		retry: locked ? "safe" : transient && refused === undefined ? "transient" : "never",
	};
}

function badResponse(endpoint: string, exchange: Exchange, reply: Reply, why: string, cause?: unknown) {
	return new CertificateeError(
		"ENDPOINT_BAD_RESPONSE",
		`${where(endpoint, exchange)} (${reply.status}): ${why}`,
		{
			context: { endpoint, operation: exchange.operation, status: reply.status },
			retryable: false,
			hint: "is the URL a Data Plane API v3 server, and not a proxy or login page?",
			cause,
		},
	);
}

/** Operations that answer without a body: anything but an empty body (or JSON) is ENDPOINT_BAD_RESPONSE. */
export function expectEmpty(endpoint: string, exchange: Exchange, reply: Reply): void {
	if (reply.text.trim() === "") return;
	const type = String(reply.headers["content-type"] ?? "");
	if (!/json/i.test(type)) {
		throw badResponse(
			endpoint,
			exchange,
			reply,
			`expected no body, got ${type.split(";")[0] || "untyped text"}`,
		);
	}
}

/** Parses a JSON body and validates its shape; anything else is ENDPOINT_BAD_RESPONSE. */
export function parseBody<S extends z.ZodType>(
	endpoint: string,
	exchange: Exchange,
	reply: Reply,
	schema: S,
): z.output<S> {
	const bad = (why: string, cause?: unknown) => badResponse(endpoint, exchange, reply, why, cause);
	const type = String(reply.headers["content-type"] ?? "");
	if (!/json/i.test(type)) throw bad(`expected JSON, got ${type.split(";")[0] || "no content type"}`);
	let value: unknown;
	try {
		value = JSON.parse(reply.text);
	} catch (cause) {
		throw bad(`body is not valid JSON (${reply.text.length} bytes; truncated?)`, cause);
	}
	const parsed = schema.safeParse(value);
	if (!parsed.success) {
		const issue = parsed.error.issues[0];
		throw bad(`unexpected shape at ${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"}`);
	}
	return parsed.data;
}

export function header(reply: Reply, name: string): string | undefined {
	const value = reply.headers[name.toLowerCase()];
	return Array.isArray(value) ? value[0] : value;
}
