/**
 * `validate --online`: what a kind contacts, as checks it declares (each kind's online.ts, listed by the
 * registries) and `cli/commands/online.ts` runs, each once, concurrently; a failure is a value.
 */
import type { ErrorCode } from "../errors.js";

export interface OnlineCheck {
	/** What was checked: `runtime-socket`, `dataplane-api`, `probe`, `acme-directory`. */
	kind: string;
	/** `target`, `target/endpoint` or the source's name. */
	name: string;
	/** What was contacted (a URL without credentials, a socket path, host:port). */
	address: string;
	ok: boolean;
	/** ok: what answered (version, pid, file count). */
	detail?: string;
	/** ok, but worth an operator's look: a configured certificate HAProxy's own ACME manages too. */
	warnings?: string[];
	error?: { code: ErrorCode; message: string; hint: string };
}

/** A check to run: what it contacts, the hint of a failure that brings none, and the contact itself. */
export interface PendingCheck {
	kind: string;
	name: string;
	address: string;
	hint: string;
	run(signal: AbortSignal): Promise<string | { detail: string; warnings: string[] }>;
}

/** What a kind's checks may read of the configuration besides its own entry: the certificates it carries. */
export interface OnlineContext {
	certificates: ReadonlyArray<{
		name: string;
		domains: readonly string[];
		issuers: readonly string[];
		profile?: string | undefined;
	}>;
}

/** A URL as printed: never with the user and password someone put in it. */
export function safeUrl(url: string): string {
	try {
		const u = new URL(url);
		u.username = "";
		u.password = "";
		return u.toString();
	} catch {
		return "(invalid URL)";
	}
}
