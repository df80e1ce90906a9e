/**
 * One writer per target across processes: flock(2) on a lock file beside the target.
 * flock (not an O_EXCL pid file) because the kernel drops the lock when its holder dies, even by
 * SIGKILL, so there is no stale-lock guessing and no pid reuse problem; and it needs no native addon
 * (koffi calls libc). The lock file is never deleted: deleting it would let two writers lock two
 * different inodes. Two opens in one process also exclude each other (flock locks belong to the open
 * file description), so concurrent syncs inside one process queue up too. The lock file is opened in the
 * directory certificatee holds open and never through a symlink: a planted `.name.lock` link must not make
 * root create or open a file elsewhere, and a planted FIFO must not block the open.
 */
import { closeSync, constants, fstatSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { CertificateeError, describeError } from "../errors.js";
import { isErrno } from "./dirfd.js";
import {
	type AtCalls,
	LOCK_EX,
	LOCK_NB,
	LOCK_UN,
	loadNativeBinding,
	type NativeBinding,
	O_CLOEXEC,
} from "./renameat2.js";

export interface HeldLock {
	release(): Promise<void>;
}

/** Locks the file `name` in the open directory `dir` (`path` names it in messages). */
export async function lockFile(
	dir: number,
	name: string,
	path: string,
	target: string,
	timeoutMs: number,
	binding?: NativeBinding,
): Promise<HeldLock> {
	const native = binding ?? (await requireNative(target));
	let fd: number;
	try {
		fd = openLockFile(native.at, dir, name);
	} catch (e) {
		const planted = isErrno(e, "ELOOP", "ENOTREG");
		throw new CertificateeError(
			"ATOMICDIR_SWAP_FAILED",
			planted
				? `lock file ${path} is not a regular file (a symlink, FIFO or device certificatee did not make)`
				: `cannot open lock file ${path}: ${describeError(e)}`,
			{
				context: { file: path, target },
				hint: planted
					? "remove it and find out who made it: certificatee never follows a link it did not make"
					: "the parent directory of the target must exist and be writable by certificatee",
				cause: e,
			},
		);
	}
	const deadline = Date.now() + timeoutMs;
	let delay = 5;
	for (;;) {
		let taken: boolean;
		try {
			taken = native.flock(fd, LOCK_EX | LOCK_NB);
		} catch (e) {
			closeSync(fd);
			throw e;
		}
		if (taken) break;
		if (Date.now() >= deadline) {
			closeSync(fd);
			throw new CertificateeError("ATOMICDIR_LOCKED", `another writer holds ${path}`, {
				context: { file: path, target },
				hint: "another certificatee (or an installer) is syncing this directory; it is retried",
				retryable: true,
			});
		}
		await sleep(delay);
		delay = Math.min(delay * 2, 50);
	}
	return {
		async release() {
			native.flock(fd, LOCK_UN);
			closeSync(fd);
		},
	};
}

/** The native binding, or ATOMICDIR_UNSUPPORTED saying why there is none (not Linux, koffi missing). */
export async function requireNative(target: string): Promise<NativeBinding> {
	const loaded = await loadNativeBinding();
	if (loaded.ok) return loaded.binding;
	throw new CertificateeError("ATOMICDIR_UNSUPPORTED", `cannot sync ${target}: ${loaded.reason}`, {
		context: { target },
		hint: "directory targets need Linux with glibc (flock and renameat2 through koffi)",
	});
}

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = constants;

/**
 * Opens read-only when the file exists (works on a read-only filesystem too), else creates it 0600;
 * never through a symlink, and only a regular file is kept.
 */
function openLockFile(at: AtCalls, dir: number, name: string): number {
	for (let attempt = 0; ; attempt++) {
		let fd: number;
		try {
			fd = at.open(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		} catch (e) {
			if (!isErrno(e, "ENOENT")) throw e;
			try {
				fd = at.open(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600);
			} catch (created) {
				// Another writer made it in between: open theirs.
				if (isErrno(created, "EEXIST") && attempt < 3) continue;
				throw created;
			}
		}
		if (fstatSync(fd).isFile()) return fd;
		closeSync(fd);
		throw Object.assign(new Error(`${name} is not a regular file`), { code: "ENOTREG" });
	}
}
