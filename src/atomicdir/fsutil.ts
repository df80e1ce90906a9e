/** Durable file and directory primitives shared by both layouts. */
import { constants } from "node:fs";
import { chmod, chown, mkdir, open, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { CertificateeError, describeError } from "../errors.js";
import type { DesiredFile, Owner } from "./types.js";

/** Creates `path` (must not exist), sets its exact mode (umask does not apply) and owner, writes, fsyncs. */
export async function writeNewFile(
	path: string,
	file: DesiredFile,
	owner: Owner | undefined,
	durable: boolean,
) {
	const fh = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, file.mode & 0o7777);
	try {
		await fh.chmod(file.mode & 0o7777);
		if (owner !== undefined) await fh.chown(owner.uid, owner.gid);
		await fh.writeFile(file.content);
		if (durable) await fh.sync();
	} finally {
		await fh.close();
	}
}

/** fsync of a directory, so the names it holds survive a power loss. */
export async function syncDirectoryEntry(path: string, durable: boolean): Promise<void> {
	if (!durable) return;
	const fh = await open(path, constants.O_RDONLY | constants.O_DIRECTORY);
	try {
		await fh.sync();
	} finally {
		await fh.close();
	}
}

/** mkdir with an exact mode and owner. */
export async function makeDirectory(path: string, mode: number, owner: Owner | undefined): Promise<void> {
	await mkdir(path, { mode: 0o700 });
	await chmod(path, mode & 0o7777);
	if (owner !== undefined) await chown(path, owner.uid, owner.gid);
}

/** Removes every entry of `dir` whose name passes `isStale`; each failure comes back as a problem. */
export async function removeStale(
	dir: string,
	isStale: (name: string) => boolean,
	target: string,
): Promise<CertificateeError[]> {
	const problems: CertificateeError[] = [];
	for (const name of await readdir(dir)) {
		if (!isStale(name)) continue;
		await rm(join(dir, name), { recursive: true, force: true }).catch((e: unknown) => {
			problems.push(cleanupError(join(dir, name), target, e));
		});
	}
	return problems;
}

export function cleanupError(path: string, target: string, cause: unknown): CertificateeError {
	return new CertificateeError(
		"ATOMICDIR_CLEANUP_FAILED",
		`could not remove ${path}: ${describeError(cause)}`,
		{
			context: { file: path, target },
			hint: "the new content is in place; remove the leftover by hand and check the filesystem",
			retryable: true,
			cause,
		},
	);
}
