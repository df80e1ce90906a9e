/**
 * One certificatee process per state directory. The lock is flock(2) on `<state_dir>/.lock`, taken with
 * LOCK_NB: the kernel drops it when the process exits in any way (kill -9 included), so there is never a stale
 * lock to clean up, and a reused pid cannot fool it. The file also holds the owner's pid for the error message.
 * flock comes from the one native binding, src/atomicdir/renameat2.ts (libc through koffi).
 * Network filesystems that do not implement flock are not supported for the state directory.
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { LOCK_EX, LOCK_NB, LOCK_UN, loadNativeBinding, type NativeBinding } from "../atomicdir/renameat2.js";
import { CertificateeError } from "../errors.js";

export interface StateLock {
	readonly path: string;
	release(): void;
}

/** Takes the state directory's lock or throws STATE_LOCKED naming the process that holds it. */
export async function acquireStateLock(stateDir: string): Promise<StateLock> {
	const native = await loadNativeBinding();
	if (!native.ok) {
		throw new CertificateeError("STATE_LOCKED", `cannot lock state directory ${stateDir}: ${native.reason}`, {
			hint: "certificatee's state directory needs Linux flock(2)",
		});
	}
	const binding: NativeBinding = native.binding;
	mkdirSync(stateDir, { recursive: true, mode: 0o700 });
	const path = join(stateDir, ".lock");
	const fd = openSync(path, "a+", 0o600);
	let locked: boolean;
	try {
		locked = binding.flock(fd, LOCK_EX | LOCK_NB);
	} catch (e) {
		closeSync(fd);
		throw new CertificateeError(
			"STATE_LOCKED",
			`cannot lock state directory ${stateDir} (${e instanceof Error ? e.message : String(e)})`,
			{
				context: { file: path },
				hint: "the state directory must be on a local filesystem that supports flock",
			},
		);
	}
	if (!locked) {
		closeSync(fd);
		const owner = readOwner(path);
		throw new CertificateeError(
			"STATE_LOCKED",
			`state directory ${stateDir} is in use by another certificatee process${owner ? ` (pid ${owner})` : ""}`,
			{
				context: { file: path },
				hint: "stop the other process, or give this one its own state_dir",
			},
		);
	}
	ftruncateSync(fd, 0);
	writeSync(fd, `${process.pid}\n`, 0);
	let held = true;
	return {
		path,
		release() {
			if (!held) return;
			held = false;
			ftruncateSync(fd, 0);
			binding.flock(fd, LOCK_UN);
			closeSync(fd);
		},
	};
}

/** The pid written in a state directory's lock file: the holder's while it is held, else the last one's. */
export function stateLockOwner(stateDir: string): number | undefined {
	const pid = readOwner(join(stateDir, ".lock"));
	return pid === undefined ? undefined : Number(pid);
}

function readOwner(path: string): string | undefined {
	try {
		const pid = readFileSync(path, "utf8").trim();
		return /^\d+$/.test(pid) ? pid : undefined;
	} catch {
		return undefined;
	}
}
