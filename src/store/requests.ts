/**
 * Operator requests to a running daemon (`renew`, `revoke`, `replace`), through files under `state_dir/requests/`.
 * The daemon holds the state directory's lock, so a command cannot write the state store; it drops a request
 * file instead, which the daemon watches (inotify), takes at the start of its next cycle (at once when idle),
 * and answers beside it: `taken` when it starts, then `served` or `failed` after the cycle that carried it.
 *
 *   requests/<id>.json          the request (written atomically by the command)
 *   requests/<id>.answer.json   the daemon's answer (taken, then served or failed)
 *   requests/daemon.pid         the pid of the daemon that serves requests, so a command can tell it from
 *                               another process holding the lock (`sync --once`)
 *
 * No key material ever passes here. Files are 0600 in a 0700 directory, like the rest of the state.
 */
import { randomBytes } from "node:crypto";
import { type FSWatcher, watch as fsWatch } from "node:fs";
import { mkdir, readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../base/atomic-file.js";
import { replacementSchema } from "./records.js";

const isoDate = z.iso.datetime();

export const operatorRequestSchema = z.object({
	id: z.string().regex(/^[a-z0-9-]+$/),
	kind: z.enum(["renew", "revoke", "replace"]),
	certificate: z.string(),
	force: z.boolean(),
	reason: z.string().optional(),
	/** `replace`: the deliberate replacement to record (no key material). */
	replacement: replacementSchema.optional(),
	requestedAt: isoDate,
	/** After this the request is void: the command stopped waiting and nobody will read the answer. */
	expiresAt: isoDate,
});
export type OperatorRequest = z.infer<typeof operatorRequestSchema>;

export const requestAnswerSchema = z.object({
	id: z.string(),
	state: z.enum(["taken", "served", "failed"]),
	/** When the daemon took it, and (served, failed) when the cycle that carried it finished. */
	takenAt: isoDate,
	at: isoDate,
	pid: z.number().int(),
	message: z.string(),
	serial: z.string().optional(),
	error: z.object({ code: z.string(), message: z.string(), hint: z.string().optional() }).optional(),
	/** Per endpoint that carries the certificate: converged or why not. */
	endpoints: z
		.array(
			z.object({
				target: z.string(),
				endpoint: z.string(),
				converged: z.boolean(),
				reason: z.string().optional(),
			}),
		)
		.optional(),
});
export type RequestAnswer = z.infer<typeof requestAnswerSchema>;

export const requestsDir = (stateDir: string) => join(stateDir, "requests");
const requestPath = (stateDir: string, id: string) => join(requestsDir(stateDir), `${id}.json`);
const answerPath = (stateDir: string, id: string) => join(requestsDir(stateDir), `${id}.answer.json`);
const daemonPidPath = (stateDir: string) => join(requestsDir(stateDir), "daemon.pid");
const ANSWER = ".answer.json";

/** Writes the request; returns it with its id. */
export async function submitRequest(
	stateDir: string,
	request: Omit<OperatorRequest, "id">,
): Promise<OperatorRequest> {
	const id = `${Date.parse(request.requestedAt).toString(36)}-${randomBytes(4).toString("hex")}`;
	const full = operatorRequestSchema.parse({ ...request, id });
	await writeFileAtomic(requestPath(stateDir, id), `${JSON.stringify(full, null, 2)}\n`, { mkdir: true });
	return full;
}

/** Removes a request and its answer (the command is done with it, or gave up). */
export async function withdrawRequest(stateDir: string, id: string): Promise<void> {
	await Promise.all([
		rm(requestPath(stateDir, id), { force: true }),
		rm(answerPath(stateDir, id), { force: true }),
	]);
}

/**
 * The requests waiting, oldest first, each removed as it is returned (taken once). A file that does not parse
 * or has expired is removed and reported in `dropped`, never served.
 */
export async function takeRequests(
	stateDir: string,
	now: Date,
): Promise<{ requests: OperatorRequest[]; dropped: Array<{ file: string; why: string }> }> {
	const dir = requestsDir(stateDir);
	let names: string[];
	try {
		names = await readdir(dir);
	} catch {
		return { requests: [], dropped: [] };
	}
	const requests: OperatorRequest[] = [];
	const dropped: Array<{ file: string; why: string }> = [];
	for (const name of names.sort()) {
		if (!name.endsWith(".json") || name.endsWith(ANSWER) || name.startsWith(".")) continue;
		const file = join(dir, name);
		let parsed: OperatorRequest | undefined;
		try {
			parsed = operatorRequestSchema.parse(JSON.parse(await readFile(file, "utf8")));
		} catch {
			parsed = undefined;
		}
		await rm(file, { force: true });
		if (!parsed) dropped.push({ file, why: "not a request certificatee wrote" });
		else if (Date.parse(parsed.expiresAt) <= now.getTime()) dropped.push({ file, why: "expired" });
		else requests.push(parsed);
	}
	return { requests: requests.sort((a, b) => a.requestedAt.localeCompare(b.requestedAt)), dropped };
}

export async function writeAnswer(stateDir: string, answer: RequestAnswer): Promise<void> {
	await writeFileAtomic(
		answerPath(stateDir, answer.id),
		`${JSON.stringify(requestAnswerSchema.parse(answer), null, 2)}\n`,
		{ mkdir: true },
	);
}

export async function readAnswer(stateDir: string, id: string): Promise<RequestAnswer | undefined> {
	try {
		return requestAnswerSchema.parse(JSON.parse(await readFile(answerPath(stateDir, id), "utf8")));
	} catch {
		// Absent, or being replaced: the next look sees it.
		return undefined;
	}
}

/** Whether the request file is still there (not taken yet). */
export async function isWaiting(stateDir: string, id: string): Promise<boolean> {
	try {
		await stat(requestPath(stateDir, id));
		return true;
	} catch {
		return false;
	}
}

/** The daemon announces that it serves requests (and which pid it is). */
export async function announceDaemon(stateDir: string, pid = process.pid): Promise<void> {
	await mkdir(requestsDir(stateDir), { recursive: true, mode: 0o700 });
	await writeFileAtomic(daemonPidPath(stateDir), `${pid}\n`, { mkdir: true });
}

export async function announcedDaemon(stateDir: string): Promise<number | undefined> {
	try {
		const text = (await readFile(daemonPidPath(stateDir), "utf8")).trim();
		return /^\d+$/.test(text) ? Number(text) : undefined;
	} catch {
		return undefined;
	}
}

/** Answers older than this are removed when the daemon starts (a command killed while waiting). */
const ANSWER_KEEP_MS = 86_400_000;

export async function removeOldAnswers(stateDir: string, now: Date): Promise<void> {
	const dir = requestsDir(stateDir);
	let names: string[];
	try {
		names = await readdir(dir);
	} catch {
		return;
	}
	for (const name of names.filter((n) => n.endsWith(ANSWER))) {
		const file = join(dir, name);
		try {
			if (now.getTime() - (await stat(file)).mtimeMs > ANSWER_KEEP_MS) await rm(file, { force: true });
		} catch {
			// Gone meanwhile.
		}
	}
}

/** Calls onChange on every change in the requests folder (created if missing); returns the stop function. */
export function watchRequests(stateDir: string, onChange: () => void): () => void {
	let watcher: FSWatcher | undefined;
	try {
		watcher = fsWatch(requestsDir(stateDir), { persistent: false }, onChange);
		watcher.on("error", () => undefined);
	} catch {
		// Missing or not watchable: requests are still taken at every cycle.
	}
	return () => watcher?.close();
}
