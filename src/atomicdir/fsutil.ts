/**
 * Durable file and directory primitives shared by both layouts.
 *
 * Metadata calls are synchronous on purpose: a sync is a few dozen calls on small files, each a few
 * microseconds on a local filesystem, and the promise API costs about five times as much per call
 * (measured: 2.1 ms against 0.4 ms per 3-file swap on tmpfs). fsync, which waits for the disk, runs
 * in libuv's thread pool so a slow disk does not stall the event loop.
 */
import {
	chmodSync,
	chownSync,
	closeSync,
	constants,
	fchmodSync,
	fchownSync,
	fsync,
	mkdirSync,
	openSync,
	readdirSync,
	rmSync,
	writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { CertificateeError, describeError } from "../errors.js";
import type { DesiredFile, Owner } from "./types.js";

const fsyncAsync = promisify(fsync);

/** Creates `path` (must not exist), sets its exact mode (umask does not apply) and owner, writes, fsyncs. */
export async function writeNewFile(
	path: string,
	file: DesiredFile,
	owner: Owner | undefined,
	durable: boolean,
) {
	const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, file.mode & 0o7777);
	try {
		fchmodSync(fd, file.mode & 0o7777);
		if (owner !== undefined) fchownSync(fd, owner.uid, owner.gid);
		writeFileSync(fd, file.content);
		if (durable) await fsyncAsync(fd);
	} finally {
		closeSync(fd);
	}
}

/** fsync of a directory, so the names it holds survive a power loss. */
export async function syncDirectoryEntry(path: string, durable: boolean): Promise<void> {
	if (!durable) return;
	const fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY);
	try {
		await fsyncAsync(fd);
	} finally {
		closeSync(fd);
	}
}

/** mkdir with an exact mode and owner. */
export function makeDirectory(path: string, mode: number, owner: Owner | undefined): void {
	mkdirSync(path, { mode: 0o700 });
	chmodSync(path, mode & 0o7777);
	if (owner !== undefined) chownSync(path, owner.uid, owner.gid);
}

/** Removes a file or directory tree; a missing one is fine. */
export function remove(path: string): void {
	rmSync(path, { recursive: true, force: true });
}

/** Removes every entry of `dir` whose name passes `isStale`; each failure comes back as a problem. */
export function removeStale(
	dir: string,
	isStale: (name: string) => boolean,
	target: string,
): CertificateeError[] {
	const problems: CertificateeError[] = [];
	for (const name of readdirSync(dir)) {
		if (!isStale(name)) continue;
		try {
			remove(join(dir, name));
		} catch (e) {
			problems.push(cleanupError(join(dir, name), target, e));
		}
	}
	return problems;
}

/** Removes `path` and returns a problem instead of throwing. */
export function removeOrReport(path: string, target: string): CertificateeError[] {
	try {
		remove(path);
		return [];
	} catch (e) {
		return [cleanupError(path, target, e)];
	}
}

export function cleanupError(path: string, target: string, cause: unknown): CertificateeError {
	return new CertificateeError(
		"ATOMICDIR_CLEANUP_FAILED",
		`could not remove ${path}: ${describeError(cause)}`,
		{
			context: { file: path, target },
			hint: "the published content is intact; remove the leftover by hand and check the filesystem",
			retryable: true,
			cause,
		},
	);
}
