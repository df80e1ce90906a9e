/**
 * Work relative to open directories. A path is resolved again by every call, so between two calls an
 * account that can write a directory on the way can swap a name for a symlink and redirect a chown, a
 * chmod, a write or a recursive delete made as root (issue 25, finding 1). Here every name is looked up
 * in a directory certificatee holds open, never through a symlink (O_NOFOLLOW on each name, no `/` in
 * names), and modes and owners are set on descriptors (fchmod/fchown). A directory certificatee makes is
 * checked to be its own before anything goes into it. Listing uses /proc/self/fd/N, the kernel's name for
 * the open directory itself (no lookup by path); the decision about each listed name then goes through
 * the `*at` calls again, so a listing that races a rename is harmless.
 */
import {
	closeSync,
	constants,
	fchmodSync,
	fchownSync,
	fstatSync,
	fsync,
	readdirSync,
	readFileSync,
	type Stats,
	writeFileSync,
} from "node:fs";
import { promisify } from "node:util";
import { AT_REMOVEDIR, type AtCalls, O_CLOEXEC, O_PATH, SyscallError } from "./renameat2.js";
import type { DesiredFile, Owner } from "./types.js";

const fsyncAsync = promisify(fsync);
const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

/** A directory named in `dir`, opened without following a symlink. */
export const DIRECTORY_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
/** Deeper than any tree certificatee makes (a version directory holds files only): a planted tree stops here. */
const MAX_DEPTH = 16;

/** Runs `use` with a descriptor, always closed. */
export function withFd<T>(fd: number, use: (fd: number) => T): T {
	try {
		return use(fd);
	} finally {
		closeSync(fd);
	}
}

export async function withFdAsync<T>(fd: number, use: (fd: number) => Promise<T>): Promise<T> {
	try {
		return await use(fd);
	} finally {
		closeSync(fd);
	}
}

export function isErrno(e: unknown, ...codes: string[]): boolean {
	const code = e instanceof SyscallError ? e.code : (e as NodeJS.ErrnoException | undefined)?.code;
	return code !== undefined && codes.includes(code);
}

/** lstat of `name` in `dir`: the entry itself, a symlink is not followed. Undefined when absent. */
export function lstatAt(at: AtCalls, dir: number, name: string): Stats | undefined {
	let fd: number;
	try {
		fd = at.open(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	} catch (e) {
		if (isErrno(e, "ENOENT")) return undefined;
		throw e;
	}
	return withFd(fd, (f) => fstatSync(f));
}

/** The names in an open directory. */
export function listAt(dir: number): string[] {
	return readdirSync(`/proc/self/fd/${dir}`);
}

/** The target of the symlink `name` in `dir`; undefined when absent or not a symlink. */
export function readlinkAt(at: AtCalls, dir: number, name: string): string | undefined {
	try {
		return at.readlink(dir, name);
	} catch (e) {
		if (isErrno(e, "ENOENT", "EINVAL")) return undefined;
		throw e;
	}
}

/**
 * The bytes of the regular file `name` in `dir`, or undefined when it is not one (a symlink, a FIFO, a
 * device: opened non-blocking so a FIFO can't hang the caller, and never read).
 */
export function readRegularAt(at: AtCalls, dir: number, name: string): Buffer | undefined {
	let fd: number;
	try {
		fd = at.open(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	} catch (e) {
		if (isErrno(e, "ENOENT", "ELOOP", "ENXIO")) return undefined;
		throw e;
	}
	return withFd(fd, (f) => (fstatSync(f).isFile() ? readFileSync(f) : undefined));
}

/**
 * mkdirat(0700) and open what was made. Refused when the directory found there is not certificatee's:
 * then another account renamed a directory of its own into the name in between.
 */
export function makeDirectoryAt(at: AtCalls, dir: number, name: string, where: string): number {
	at.mkdir(dir, name, 0o700);
	const fd = at.open(dir, name, DIRECTORY_FLAGS);
	const st = fstatSync(fd);
	const uid = process.geteuid?.();
	if (uid !== undefined && st.uid !== uid) {
		closeSync(fd);
		throw new SyscallError("mkdirat", "EEXIST", 17, `${where} (replaced by uid ${st.uid} while being made)`);
	}
	return fd;
}

/** The exact mode (umask does not apply) and owner, set on the descriptor. */
export function setModeAndOwner(fd: number, mode: number, owner: Owner | undefined): void {
	fchmodSync(fd, mode & 0o7777);
	if (owner !== undefined) fchownSync(fd, owner.uid, owner.gid);
}

/** Creates `name` in `dir` (must not exist, never through a symlink), sets mode and owner, writes, fsyncs. */
export async function writeNewFileAt(
	at: AtCalls,
	dir: number,
	name: string,
	file: DesiredFile,
	owner: Owner | undefined,
	durable: boolean,
): Promise<void> {
	const flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	const fd = at.open(dir, name, flags, file.mode & 0o7777);
	await withFdAsync(fd, async (f) => {
		setModeAndOwner(f, file.mode, owner);
		writeFileSync(f, file.content);
		if (durable) await fsyncAsync(f);
	});
}

/** fsync of an open directory, so the names it holds survive a power loss. */
export async function syncFd(fd: number, durable: boolean): Promise<void> {
	if (durable) await fsyncAsync(fd);
}

/**
 * Removes `name` from `dir`, a whole tree when it is a directory; a missing one is fine. Never follows a
 * symlink: a link is removed itself, and a directory is emptied through its own descriptor.
 */
export function removeAt(at: AtCalls, dir: number, name: string, depth = 0): void {
	try {
		at.unlink(dir, name, 0);
		return;
	} catch (e) {
		if (isErrno(e, "ENOENT")) return;
		if (!isErrno(e, "EISDIR", "EPERM")) throw e;
	}
	if (depth >= MAX_DEPTH) {
		throw new SyscallError("unlinkat", "ELOOP", 40, `${name} (nested deeper than ${MAX_DEPTH} directories)`);
	}
	let fd: number;
	try {
		fd = at.open(dir, name, DIRECTORY_FLAGS);
	} catch (e) {
		if (isErrno(e, "ENOENT")) return;
		// Swapped for a link or a file since the unlink: remove that instead, never what it points to.
		if (!isErrno(e, "ELOOP", "ENOTDIR")) throw e;
		removeAt(at, dir, name, depth + 1);
		return;
	}
	withFd(fd, (f) => {
		for (const child of listAt(f)) removeAt(at, f, child, depth + 1);
	});
	try {
		at.unlink(dir, name, AT_REMOVEDIR);
	} catch (e) {
		if (!isErrno(e, "ENOENT")) throw e;
	}
}
