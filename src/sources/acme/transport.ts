/**
 * HTTP for acme-client, per issuer instead of process-wide.
 *
 * acme-client 5.4 sends every request through one module-global axios instance (`acme.axios`): its TLS
 * trust, its retry policy (5 attempts, 5-25 s apart, ~75 s before an unreachable or untrusted CA fails) and
 * its interceptors are shared by every client in the process. Each client's internal HttpClient (the single
 * place acme-client performs I/O; pinned at 5.4.0) is replaced (session.ts) by one that sends through
 * acmeRequest: undici on the issuer's own Agent, so each issuer has its own `ca_file`, its own short retry
 * policy, cancellation through the caller's AbortSignal, and a record of every ACME problem document the CA
 * returned (acme-client keeps only the detail text; operators need the problem type too). `acme.axios` is
 * never touched.
 */
import { type Dispatcher, request } from "undici";
import { readBodyCapped } from "../../base/body.js";
import { formatByteSize } from "../../base/size.js";
import { CertificateeError, describeError } from "../../errors.js";
import { VERSION } from "../../version.js";

/** An RFC 8555 §6.7 problem document (RFC 7807), as the CA sent it. */
export interface AcmeProblem {
	type: string;
	detail: string;
	status?: number;
	/** The URL whose response carried it (an order, authorization or challenge). */
	url?: string;
	/** Per-identifier problems (e.g. one rejected name of several). */
	subproblems?: { type: string; detail: string; identifier?: string }[];
}

/** What acme-client's HttpClient.request returns (an axios response, reduced to what it reads). */
export interface AcmeHttpResponse {
	status: number;
	headers: Record<string, string>;
	data: unknown;
}

interface AcmeHttpOptions {
	data?: unknown;
	headers?: Record<string, string>;
}

/** One issuance (or account/ARI operation): the caller's cancellation and the problems seen so far. */
export interface TransportContext {
	signal: AbortSignal;
	problems: AcmeProblem[];
}

export interface TransportOptions {
	dispatcher: Dispatcher;
	/** Extra attempts when the CA is unreachable or answers 429/503. */
	retries: number;
	/** One request as a whole, headers and body (a CA trickling bytes never resets it). */
	requestTimeoutMs: number;
	/** The largest answer read (default MAX_ACME_RESPONSE_BYTES). */
	maxResponseBytes?: number;
	/** First retry delay; doubles. */
	retryDelayMs: number;
}

const TLS_CODES = new Set([
	"UNABLE_TO_VERIFY_LEAF_SIGNATURE",
	"UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
	"SELF_SIGNED_CERT_IN_CHAIN",
	"DEPTH_ZERO_SELF_SIGNED_CERT",
	"CERT_HAS_EXPIRED",
	"CERT_NOT_YET_VALID",
	"ERR_TLS_CERT_ALTNAME_INVALID",
	"CERT_UNTRUSTED",
]);

const USER_AGENT = `certificatee/${VERSION} (acme-client)`;
/** ACME answers are JSON objects and certificate chains of a few KiB: 1 MiB is far more than any CA sends. */
export const MAX_ACME_RESPONSE_BYTES = 1024 ** 2;
/** The longest Retry-After honoured (a CA's hint, not a promise). */
export const MAX_RETRY_AFTER_MS = 30_000;

function errorCode(e: unknown): string | undefined {
	const code = (e as { code?: unknown } | undefined)?.code;
	if (typeof code === "string") return code;
	const causeCode = (e as { cause?: { code?: unknown } } | undefined)?.cause?.code;
	return typeof causeCode === "string" ? causeCode : undefined;
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
	return new Promise((resolve, reject) => {
		if (signal.aborted) return reject(signal.reason);
		const onAbort = () => {
			clearTimeout(timer);
			reject(signal.reason);
		};
		const timer = setTimeout(() => {
			signal.removeEventListener("abort", onAbort);
			resolve();
		}, ms);
		signal.addEventListener("abort", onAbort, { once: true });
	});
}

/** A Retry-After header (seconds or an HTTP date) in milliseconds from now. */
export function retryAfterMs(header: string | undefined): number | undefined {
	if (!header) return undefined;
	const seconds = Number(header);
	if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
	const date = Date.parse(header);
	return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function flattenHeaders(raw: Record<string, string | string[] | undefined>): Record<string, string> {
	const out: Record<string, string> = {};
	for (const [k, v] of Object.entries(raw)) {
		if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
	}
	return out;
}

function asProblem(value: unknown, status?: number): AcmeProblem | undefined {
	if (typeof value !== "object" || value === null) return undefined;
	const v = value as Record<string, unknown>;
	if (typeof v.type !== "string" || !v.type.includes(":")) return undefined;
	const problem: AcmeProblem = { type: v.type, detail: typeof v.detail === "string" ? v.detail : "" };
	if (status !== undefined) problem.status = status;
	if (Array.isArray(v.subproblems)) {
		problem.subproblems = v.subproblems.flatMap((s: unknown) => {
			const p = asProblem(s);
			if (!p) return [];
			const id = (s as { identifier?: { value?: unknown } }).identifier?.value;
			return [{ type: p.type, detail: p.detail, ...(typeof id === "string" ? { identifier: id } : {}) }];
		});
	}
	return problem;
}

/** Problems in a response: a problem document, or an order/authorization/challenge carrying `error`. */
export function problemsIn(status: number, contentType: string, data: unknown): AcmeProblem[] {
	if (contentType.includes("problem+json")) {
		const p = asProblem(data, status);
		return p ? [p] : [];
	}
	if (typeof data !== "object" || data === null) return [];
	const found: AcmeProblem[] = [];
	const own = asProblem((data as { error?: unknown }).error);
	if (own) found.push(own);
	const challenges = (data as { challenges?: unknown }).challenges;
	if (Array.isArray(challenges)) {
		for (const c of challenges) {
			const p = asProblem((c as { error?: unknown } | null)?.error);
			if (p) found.push(p);
		}
	}
	return found;
}

function unreachable(url: string, e: unknown): CertificateeError {
	const code = errorCode(e);
	if (code && TLS_CODES.has(code)) {
		return new CertificateeError("ACME_ERROR", `ACME server ${url} is not trusted: ${code}`, {
			context: { endpoint: url },
			hint: "set ca_file to the CA bundle that signed the ACME server's HTTPS certificate",
			retryable: false,
			cause: e,
		});
	}
	return new CertificateeError(
		"ACME_ERROR",
		`ACME server ${url} is unreachable: ${code ?? describeError(e)}`,
		{
			context: { endpoint: url },
			hint: "check directory_url and that the CA is up and reachable from this host",
			retryable: true,
			cause: e,
		},
	);
}

function timedOut(url: string, ms: number, cause: unknown): CertificateeError {
	return new CertificateeError("ACME_ERROR", `ACME server ${url} sent no complete answer within ${ms} ms`, {
		context: { endpoint: url },
		hint: "the CA (or a proxy before it) is slow or stuck; certificatee retries at the next cycle",
		retryable: true,
		cause,
	});
}

function tooLarge(url: string, status: number, max: number): CertificateeError {
	return new CertificateeError(
		"ACME_ERROR",
		`ACME server ${url} (${status}): the answer is larger than ${formatByteSize(max)}; not read further`,
		{
			context: { endpoint: url, status },
			hint: "no ACME answer is that large: is directory_url the CA's directory, and not a proxy or file server?",
			retryable: false,
		},
	);
}

/** One HTTP exchange with the CA, retried on network errors and 429/503. */
export async function acmeRequest(
	options: TransportOptions,
	ctx: TransportContext,
	url: string,
	method: string,
	body?: AcmeHttpOptions,
): Promise<AcmeHttpResponse> {
	const verb = method.toUpperCase() as Dispatcher.HttpMethod;
	const max = options.maxResponseBytes ?? MAX_ACME_RESPONSE_BYTES;
	for (let attempt = 0; ; attempt++) {
		const canRetry = attempt < options.retries;
		const delay = options.retryDelayMs * 2 ** attempt;
		// undici's timers are idle timers; this bounds the whole exchange, the body included.
		const deadline = AbortSignal.timeout(options.requestTimeoutMs);
		let res: Dispatcher.ResponseData;
		let text: string | undefined;
		try {
			res = await request(url, {
				method: verb,
				dispatcher: options.dispatcher,
				signal: AbortSignal.any([ctx.signal, deadline]),
				headersTimeout: options.requestTimeoutMs,
				bodyTimeout: options.requestTimeoutMs,
				headers: {
					"user-agent": USER_AGENT,
					...(body?.data === undefined ? {} : { "content-type": "application/jose+json" }),
				},
				...(body?.data === undefined ? {} : { body: JSON.stringify(body.data) }),
			});
			text = await readBodyCapped(res, max);
		} catch (e) {
			if (ctx.signal.aborted) throw ctx.signal.reason;
			const code = errorCode(e);
			const failure = deadline.aborted ? timedOut(url, options.requestTimeoutMs, e) : unreachable(url, e);
			if (!canRetry || (code && TLS_CODES.has(code))) throw failure;
			await sleep(delay, ctx.signal);
			continue;
		}
		if (text === undefined) throw tooLarge(url, res.statusCode, max);
		const headers = flattenHeaders(res.headers);
		const contentType = headers["content-type"] ?? "";
		if ((res.statusCode === 429 || res.statusCode === 503) && canRetry) {
			const wait = Math.min(retryAfterMs(headers["retry-after"]) ?? delay, MAX_RETRY_AFTER_MS);
			await sleep(wait, ctx.signal);
			continue;
		}
		let data: unknown = text;
		if (contentType.includes("json") && text.length > 0) {
			try {
				data = JSON.parse(text);
			} catch {
				data = text;
			}
		}
		ctx.problems.push(...problemsIn(res.statusCode, contentType, data).map((p) => ({ ...p, url })));
		return { status: res.statusCode, headers, data };
	}
}
