/**
 * Waiting for an authorization or order to leave `pending`/`processing` (RFC 8555 §7.5.1, §7.4): the first
 * look at once, then after 1/16 of `poll_interval`, doubling to it and on up to 10× it, or after the CA's
 * Retry-After when that is longer (never sooner than the CA asks; at most 30 s). A CA that validates in tens
 * of milliseconds (Pebble answers HTTP-01 in 20-50 ms) is seen within ~60 ms rather than a whole
 * `poll_interval` later; one that takes seconds is asked a few more times during the first second only. Replaces acme-client 5.4's waitForValidStatus, which ignores Retry-After and sleeps through
 * cancellation; the outcomes and messages are its own (an `invalid` item fails with the CA's detail).
 */
import type acme from "acme-client";
import { type AcmeHttpResponse, MAX_RETRY_AFTER_MS, retryAfterMs, sleep } from "./transport.js";

export interface PollOptions {
	/** `poll_interval`: the waits start at 1/16 of it and double up to 10× it. */
	intervalMs: number;
	/** Looks in all (acme-client's backoffAttempts as this issuer set it). */
	attempts: number;
	signal: AbortSignal;
}

const FIRST_WAIT_DIVISOR = 16;

interface ApiInternals {
	api: { apiRequest(url: string, payload: null, validStatusCodes: number[]): Promise<AcmeHttpResponse> };
}

/** acme-client's formatResponseError: the problem detail the error message carries. */
function responseError(data: unknown): string {
	const d = data as { error?: { detail?: string } | string; detail?: string } | null;
	let text: unknown;
	if (d) {
		if (d.error) text = (typeof d.error === "object" && d.error.detail) || d.error;
		else text = d.detail || JSON.stringify(d);
	}
	return String(text || "").replace(/\n/g, "");
}

/** The item (with its url) once it is `ready` or `valid`; throws when it turns `invalid` or stays pending. */
export async function waitForStatus<T extends { url?: string }>(
	client: acme.Client,
	item: T,
	{ intervalMs, attempts, signal }: PollOptions,
): Promise<T> {
	const url = item.url;
	if (!url) throw new Error("Unable to verify status of item, URL not found");
	const { api } = client as unknown as ApiInternals;
	for (let attempt = 1; ; attempt++) {
		signal.throwIfAborted();
		const resp = await api.apiRequest(url, null, [200]);
		const data = resp.data as { status?: string };
		if (data.status === "ready" || data.status === "valid") return { ...(resp.data as T), url };
		if (data.status === "invalid") throw new Error(responseError(resp.data));
		if (data.status !== "pending" && data.status !== "processing") {
			throw new Error(`Unexpected item status: ${data.status}`);
		}
		if (attempt >= attempts) throw new Error("Operation is pending or processing");
		const backoff = Math.min((intervalMs * 2 ** (attempt - 1)) / FIRST_WAIT_DIVISOR, intervalMs * 10);
		const asked = retryAfterMs(resp.headers["retry-after"]) ?? 0;
		await sleep(Math.min(Math.max(backoff, asked), Math.max(backoff, MAX_RETRY_AFTER_MS)), signal);
	}
}
