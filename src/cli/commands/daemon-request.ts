/**
 * How an operator's request (`renew`, `revoke`, `replace`) reaches whoever serves it outside a cluster: the state
 * directory's store when nobody holds it, else the running daemon, which takes the request between cycles and
 * answers it (store/requests.ts).
 */
import { watch as fsWatch } from "node:fs";
import { parseDuration } from "../../base/duration.js";
import type { Config } from "../../config/schema.js";
import { CertificateeError, ERROR_CODES, type ErrorCode, isCertificateeError } from "../../errors.js";
import { type FileStore, openFileStore } from "../../store/file-store.js";
import { stateLockOwner } from "../../store/lock.js";
import {
	announcedDaemon,
	isWaiting,
	type OperatorRequest,
	type RequestAnswer,
	readAnswer,
	requestsDir,
	submitRequest,
	withdrawRequest,
} from "../../store/requests.js";
import type { CommandContext } from "../context.js";

/** How long `renew`/`revoke` wait for a running daemon to serve the request, unless `--wait` says otherwise. */
export const DEFAULT_WAIT = "10m";

export function waitMs(text: string | undefined): number {
	const ms = parseDuration(text ?? DEFAULT_WAIT);
	if (ms === undefined || ms <= 0) {
		throw new CertificateeError("CONFIG_INVALID", `--wait ${text}: not a duration`, {
			context: { field: "--wait" },
			hint: "e.g. --wait 90s, --wait 15m",
		});
	}
	return ms;
}

/**
 * The state directory's store with its lock, or the pid of the running daemon that holds the lock and serves
 * requests. Another holder (a `sync --once` in progress) is STATE_LOCKED as before.
 */
export async function openLocalOrDaemon(config: Config): Promise<{ store: FileStore } | { daemon: number }> {
	try {
		return { store: await openFileStore(config.state_dir) };
	} catch (e) {
		if (!isCertificateeError(e, "STATE_LOCKED")) throw e;
		const owner = stateLockOwner(config.state_dir);
		const daemon = await announcedDaemon(config.state_dir);
		if (owner === undefined || daemon !== owner) throw e;
		return { daemon };
	}
}

/**
 * Leaves the request for the running daemon and waits for its answer: `taken` (logged), then `served` (printed,
 * exit 0) or `failed` (its error, exit 1). Not taken within `wait`: withdrawn, NOT_AVAILABLE.
 */
export async function askDaemon(
	ctx: CommandContext,
	config: Config,
	pid: number,
	ask: DaemonAsk,
	wait: number,
): Promise<void> {
	const stateDir = config.state_dir;
	const requestedAt = new Date();
	const request = await submitRequest(stateDir, {
		...ask,
		requestedAt: requestedAt.toISOString(),
		expiresAt: new Date(requestedAt.getTime() + wait).toISOString(),
	});
	ctx.log.info(
		{ certificate: ask.certificate, request: request.id, daemon: pid },
		`${ask.kind} request left for the running daemon (pid ${pid})`,
	);
	let taken: RequestAnswer | undefined;
	const final = await waitForAnswer(stateDir, request.id, wait, (a) => {
		if (a.state !== "taken" || taken) return;
		taken = a;
		ctx.log.info(
			{ certificate: ask.certificate, takenAt: a.takenAt },
			ask.kind === "replace"
				? "request taken by the daemon: replacement recorded, pushing it now"
				: "request taken by the daemon: ordering now",
		);
	});
	if (!final) throw await unanswered(stateDir, request.id, pid, ask, wait, taken);
	await withdrawRequest(stateDir, request.id);
	if (ctx.options.json) ctx.out(JSON.stringify({ request, answer: final }, null, 2));
	if (final.state === "failed") {
		throw new CertificateeError(
			codeOf(final.error?.code),
			`${ask.kind} "${ask.certificate}" (taken by the daemon at ${final.takenAt}): ${final.message}`,
			{
				context: { certificate: ask.certificate, operation: ask.kind },
				...(final.error?.hint ? { hint: final.error.hint } : {}),
			},
		);
	}
	if (!ctx.options.json) printServed(ctx, ask.certificate, request.requestedAt, final);
}

type DaemonAsk = Pick<OperatorRequest, "kind" | "certificate" | "force" | "replacement"> & {
	reason?: string;
};

/** No final answer within `wait`: not taken (the request is withdrawn), or taken and its cycle still running. */
async function unanswered(
	stateDir: string,
	id: string,
	pid: number,
	ask: DaemonAsk,
	wait: number,
	taken: RequestAnswer | undefined,
): Promise<CertificateeError> {
	if (await isWaiting(stateDir, id)) {
		await withdrawRequest(stateDir, id);
		return new CertificateeError(
			"NOT_AVAILABLE",
			`the daemon (pid ${pid}) did not take the ${ask.kind} request for "${ask.certificate}" within --wait (${Math.round(wait / 1000)} s); request withdrawn`,
			{
				context: { certificate: ask.certificate, operation: ask.kind },
				hint: "it takes requests between cycles: a long cycle delays it; retry with a longer --wait, or see certificatee status",
			},
		);
	}
	return new CertificateeError(
		"NOT_AVAILABLE",
		`the daemon took the ${ask.kind} request for "${ask.certificate}"${taken ? ` at ${taken.takenAt}` : ""} but its cycle did not finish within ${Math.round(wait / 1000)} s`,
		{
			context: { certificate: ask.certificate, operation: ask.kind },
			hint: "it carries on: certificatee status shows when the new certificate is served",
		},
	);
}

/** The daemon's `served` answer, for a human: the serial, when, and each endpoint. */
function printServed(
	ctx: CommandContext,
	certificate: string,
	requestedAt: string,
	final: RequestAnswer,
): void {
	ctx.out(`${certificate}: serial ${final.serial ?? "?"} served at ${final.at}`);
	ctx.out(`  requested ${requestedAt}, taken by the daemon (pid ${final.pid}) at ${final.takenAt}`);
	for (const e of final.endpoints ?? []) {
		const where = e.endpoint === e.target ? e.target : `${e.target} ${e.endpoint}`;
		ctx.out(`  ${where}: ${e.converged ? "served" : e.reason}`);
	}
}

function codeOf(code: string | undefined): ErrorCode {
	return (ERROR_CODES as readonly string[]).includes(code ?? "") ? (code as ErrorCode) : "ISSUE_FAILED";
}

/** The final answer (served or failed), or undefined when `wait` passed first; `seen` hears each answer read. */
async function waitForAnswer(
	stateDir: string,
	id: string,
	wait: number,
	seen: (a: RequestAnswer) => void,
): Promise<RequestAnswer | undefined> {
	const deadline = Date.now() + wait;
	return new Promise((resolve) => {
		let done = false;
		let checking = false;
		let again = false;
		const finish = (a: RequestAnswer | undefined) => {
			if (done) return;
			done = true;
			watcher?.close();
			clearInterval(poll);
			clearTimeout(timer);
			resolve(a);
		};
		const check = async () => {
			if (checking) {
				again = true;
				return;
			}
			checking = true;
			do {
				again = false;
				const a = await readAnswer(stateDir, id);
				if (a) seen(a);
				if (a && a.state !== "taken") return finish(a);
			} while (again && !done);
			checking = false;
		};
		let watcher: ReturnType<typeof fsWatch> | undefined;
		try {
			watcher = fsWatch(requestsDir(stateDir), { persistent: false }, () => void check());
			watcher.on("error", () => undefined);
		} catch {
			watcher = undefined;
		}
		// Behind the watch, in case the filesystem does not report changes (a network mount).
		const poll = setInterval(() => void check(), 1000);
		const timer = setTimeout(() => finish(undefined), Math.max(0, deadline - Date.now()));
		void check();
	});
}
