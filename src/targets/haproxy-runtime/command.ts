/**
 * Runtime API commands as data, and what their answers mean. Pure: no socket, no clock. A request is framed
 * here (master `@1 ` prefix, `<<` payload, the tune.bufsize limit); an answer is read into a verdict (locked,
 * permission denied, failed with HAProxy's words, or ok) that the client acts on (docs/haproxy-runtime-target.md,
 * "Safety rules").
 */
import { CertificateeError, type ErrorCode, scrubSecrets } from "../../errors.js";
import { payloadTooLarge } from "../haproxy/bufsize.js";
import { isLocked } from "./parse.js";

/** Optional crt-list line parts for `add ssl crt-list`. */
export interface CrtListEntryOptions {
	/** SSL options without brackets, e.g. "alpn h2,http/1.1". */
	sslOptions?: string;
	/** SNI filters. */
	filters?: string[];
}

/** How requests to one endpoint are framed. */
export interface Framing {
	/** Commands go through the master CLI to the current worker (`@1 ` prefix). */
	master: boolean;
	/** HAProxy's tune.bufsize: requests of this size or more are refused. */
	bufsize: number;
	/** The endpoint's name, for errors. */
	endpoint: string;
}

/** What an answer to a certificate command means. */
export type Answer =
	| { kind: "ok"; text: string }
	/** "Operations on certificates are currently locked!": retry later. */
	| { kind: "locked" }
	/** The socket is not `level admin`. */
	| { kind: "denied" }
	/** HAProxy refused; `problem` is its meaningful text (or ours, for a misnamed transaction). */
	| { kind: "failed"; problem: string };

/**
 * HAProxy's CLI splits on whitespace and `;`, starts a payload at `<<`, a comment at `#`, and unescapes `\`
 * (`new ssl cert a\x.pem` creates `ax.pem`: a pipelined set + commit would act on another store before the
 * echo check), so none of them may be in a name.
 */
const SAFE_NAME = /^[^\s\0<>;#\\]+$/;

/** The operation a command performs, for errors: its first three words (`set ssl cert`). */
export function operationOf(command: string): string {
	return command.split(" ").slice(0, 3).join(" ");
}

/**
 * The bytes sent for one command: `@1 ` through the master CLI, a payload after `<<` ended by an empty line.
 * Throws when the command spans lines, the payload holds an empty line (it would end the payload early), or
 * the request reaches tune.bufsize (HAProxy 2.6-3.2 spin and exit on it).
 */
export function frameRequest(command: string, payload: string | undefined, framing: Framing): string {
	if (command.includes("\n")) throw new Error("RuntimeClient.run: a command is one line");
	const prefix = framing.master ? "@1 " : "";
	const request = payload === undefined ? `${prefix}${command}\n` : `${prefix}${command} <<\n${payload}\n`;
	if (payload !== undefined && /\n\n/.test(`\n${payload}`.replace(/\n$/, ""))) {
		throw commandFailed(framing.endpoint, operationOf(command), undefined, "payload contains an empty line");
	}
	const tooLarge = payloadTooLarge({
		size: Buffer.byteLength(request),
		bufsize: framing.bufsize,
		endpoint: framing.endpoint,
		operation: operationOf(command),
	});
	if (tooLarge) throw tooLarge;
	return request;
}

/** Reads an answer: the lock and the permission check first, then the command's own `check`. */
export function readAnswer(text: string, check: (text: string) => string | undefined): Answer {
	if (isLocked(text)) return { kind: "locked" };
	if (text.startsWith("Permission denied")) return { kind: "denied" };
	const problem = check(text);
	return problem === undefined ? { kind: "ok", text } : { kind: "failed", problem };
}

/** Wait before the next attempt while certificates are locked: 10 ms doubling to 500 ms, jittered ±50 %. */
export function lockBackoffMs(attempt: number, random: number): number {
	return Math.min(2 ** attempt * 5, 500) * (0.5 + random);
}

/**
 * `add ssl crt-list <list>`: the cert path on the command line, or a one-line payload when options or
 * filters are given.
 */
export function addCrtListCommand(
	list: string,
	certPath: string,
	entry: CrtListEntryOptions,
	endpoint: string,
): { command: string; payload?: string } {
	checkName(list, endpoint);
	checkName(certPath, endpoint);
	const parts = [certPath];
	if (entry.sslOptions) parts.push(`[${entry.sslOptions.replace(/[\]\n]/g, "")}]`);
	for (const f of entry.filters ?? []) parts.push(checkName(f, endpoint));
	if (parts.length === 1) return { command: `add ssl crt-list ${list} ${certPath}` };
	return { command: `add ssl crt-list ${list}`, payload: `${parts.join(" ")}\n` };
}

/** A certificate, crt-list or filter name HAProxy would read as one token; anything else is refused. */
export function checkName(name: string, endpoint: string): string {
	if (!SAFE_NAME.test(name)) {
		throw new CertificateeError(
			"RUNTIME_COMMAND_FAILED",
			`refused an unsafe certificate or crt-list name for ${endpoint}`,
			{
				context: { endpoint, certificate: name.replace(/[\s\0]/g, "?"), operation: "validate name" },
				hint: "names may not contain whitespace, NUL, '<', '>', ';', '#' or '\\' (HAProxy's CLI unescapes it): rename the file",
			},
		);
	}
	return name;
}

export function commandFailed(
	endpoint: string,
	operation: string,
	subject: string | undefined,
	answer: string,
	hint?: string,
	code: ErrorCode = "RUNTIME_COMMAND_FAILED",
): CertificateeError {
	return new CertificateeError(
		code,
		`${operation}${subject ? ` ${subject}` : ""} on ${endpoint} failed: ${scrubSecrets(answer)}`,
		{ context: { endpoint, certificate: subject, operation }, hint },
	);
}

export function stayedLocked(
	endpoint: string,
	operation: string,
	subject: string,
	attempts: number,
): CertificateeError {
	return new CertificateeError(
		"RUNTIME_LOCKED",
		`${operation} on ${endpoint}: certificate operations stayed locked after ${attempts} attempts`,
		{
			context: { endpoint, certificate: subject, operation },
			retryable: true,
			hint: "another commit (or HAProxy's ACME updater) holds the certificate lock; retried next cycle. If it stays locked cycle after cycle while nothing else writes, the worker kept the lock of a client killed mid-command (seen with HAProxy 3.4.0): reload HAProxy, which is safe (certificatee writes every file whole before any runtime change)",
		},
	);
}
