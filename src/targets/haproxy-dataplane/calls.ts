/**
 * The request shapes every Data Plane API resource uses: a validated read, a write behind the endpoint's
 * one-at-a-time lock, an empty-bodied write, the reload a 202 announces, and the multipart upload.
 */
import { randomBytes } from "node:crypto";
import pLimit from "p-limit";
import type { z } from "zod";
import { type Exchange, expectEmpty, type HttpClient, header, parseBody, type Reply } from "./http.js";

/** A write that made the server schedule (or run) a reload: 202 with a Reload-ID header. */
export interface ReloadCaused {
	reloadId?: string;
}

export interface ApiCalls {
	readonly endpoint: string;
	/** GET `path` and validate the body with `schema`. */
	read<S extends z.ZodType>(
		operation: string,
		path: string,
		schema: S,
		signal: AbortSignal,
		refusal?: Exchange["refusal"],
	): Promise<z.output<S>>;
	/** A write, after every earlier write of this endpoint finished. */
	write<T>(exchange: Omit<Exchange, "read">, accept: (reply: Reply) => T, signal: AbortSignal): Promise<T>;
	/** A write whose answer must have an empty body (runtime writes). */
	writeEmpty(exchange: Omit<Exchange, "read">, signal: AbortSignal): Promise<void>;
}

export function createApiCalls(endpoint: string, http: HttpClient): ApiCalls {
	// HAProxy has one certificate transaction per process: never interleave two writes.
	const writeLock = pLimit(1);
	const write = <T>(exchange: Omit<Exchange, "read">, accept: (reply: Reply) => T, signal: AbortSignal) =>
		writeLock(() => http.call({ ...exchange, read: false }, accept, signal));
	return {
		endpoint,
		read: (operation, path, schema, signal, refusal) => {
			const exchange: Exchange = {
				operation,
				method: "GET",
				path,
				read: true,
				...(refusal ? { refusal } : {}),
			};
			return http.call(exchange, (reply) => parseBody(endpoint, exchange, reply, schema), signal);
		},
		write,
		// Anything but an empty body (a proxy's HTML page) is not a v3 server's answer.
		writeEmpty: (exchange, signal) =>
			write(exchange, (reply) => expectEmpty(endpoint, { ...exchange, read: false }, reply), signal),
	};
}

/** The reload a write caused: a 202, with the Reload-ID when the server sent one. */
export function reloadOf(reply: Reply): ReloadCaused | undefined {
	if (reply.status !== 202) return undefined;
	const id = header(reply, "reload-id");
	return id === undefined ? {} : { reloadId: id };
}

/** `<base>/<name>`, the name encoded. */
export function named(base: string, name: string): string {
	return `${base}/${encodeURIComponent(name)}`;
}

/** A `file_upload` form field, as client-native's upload handlers read it. */
export function multipart(filename: string, pem: string): { contentType: string; data: string } {
	const boundary = `certificatee-${randomBytes(12).toString("hex")}`;
	const safeName = filename.replace(/["\r\n]/g, "_");
	const data =
		`--${boundary}\r\n` +
		`Content-Disposition: form-data; name="file_upload"; filename="${safeName}"\r\n` +
		"Content-Type: text/plain\r\n\r\n" +
		`${pem}\r\n--${boundary}--\r\n`;
	return { contentType: `multipart/form-data; boundary=${boundary}`, data };
}
