/**
 * One writer per target across processes: flock(2) on a lock file beside the target.
 * flock (not an O_EXCL pid file) because the kernel drops the lock when its holder dies, even by
 * SIGKILL, so there is no stale-lock guessing and no pid reuse problem; and it needs no native addon
 * (koffi calls libc). The lock file is never deleted: deleting it would let two writers lock two
 * different inodes. Two opens in one process also exclude each other (flock locks belong to the open
 * file description), so concurrent syncs inside one process queue up too.
 */
import { closeSync, openSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { CertificateeError, describeError } from "../errors.js";
import { LOCK_EX, LOCK_NB, LOCK_UN, loadNativeBinding, type NativeBinding } from "./renameat2.js";

export interface HeldLock {
	release(): Promise<void>;
}

export async function lockFile(
	path: string,
	target: string,
	timeoutMs: number,
	binding?: NativeBinding,
): Promise<HeldLock> {
	const native = binding ?? (await requireNative(target));
	let fd: number;
	try {
		fd = openLockFile(path);
	} catch (e) {
		throw new CertificateeError(
			"ATOMICDIR_SWAP_FAILED",
			`cannot open lock file ${path}: ${describeError(e)}`,
			{
				context: { file: path, target },
				hint: "the parent directory of the target must exist and be writable by certificatee",
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

/** Opens read-only when the file exists (works on a read-only filesystem too), else creates it 0600. */
function openLockFile(path: string): number {
	try {
		return openSync(path, "r");
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
		return openSync(path, "a", 0o600);
	}
}
