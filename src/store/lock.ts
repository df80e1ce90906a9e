/**
 * One certificatee process per state directory. The lock is flock(2) on `<state_dir>/.lock`, taken with
 * LOCK_NB: the kernel drops it when the process exits in any way (kill -9 included), so there is never a stale
 * lock to clean up, and a reused pid cannot fool it. The file also holds the owner's pid for the error message.
 * flock comes from the one native binding, src/atomicdir/renameat2.ts (libc through koffi).
 * Network filesystems that do not implement flock are not supported for the state directory.
 */
import {
	accessSync,
	closeSync,
	constants,
	ftruncateSync,
	mkdirSync,
	openSync,
	readFileSync,
	statSync,
	writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { LOCK_EX, LOCK_NB, LOCK_UN, loadNativeBinding, type NativeBinding } from "../atomicdir/renameat2.js";
import { CertificateeError } from "../errors.js";
import { checkStateDir } from "./state-dir.js";

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
	const path = join(stateDir, ".lock");
	let fd: number;
	try {
		mkdirSync(stateDir, { recursive: true, mode: 0o700 });
		fd = openSync(path, "a+", 0o600);
	} catch (e) {
		throw unwritable(stateDir, path, e);
	}
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

/**
 * STATE_UNWRITABLE when this user cannot create or write the state directory (checked without writing: the
 * directory, or the nearest parent that exists when it does not), for `validate` and before the lock is taken;
 * STATE_EXPOSED when it exists and another account can write it (checkStateDir).
 */
export function stateDirProblem(stateDir: string): CertificateeError | undefined {
	let at = stateDir;
	for (;;) {
		try {
			if (!statSync(at).isDirectory()) {
				return new CertificateeError("STATE_UNWRITABLE", `state_dir ${stateDir}: ${at} is not a directory`, {
					context: { field: "state_dir", file: at },
					hint: "point state_dir at a directory (or a path that can be created)",
				});
			}
			break;
		} catch (e) {
			if ((e as NodeJS.ErrnoException).code !== "ENOENT" || dirname(at) === at)
				return unwritable(stateDir, at, e);
			at = dirname(at);
		}
	}
	try {
		accessSync(at, constants.W_OK | constants.X_OK);
	} catch (e) {
		return unwritable(stateDir, at, e);
	}
	// An existing directory other accounts can write is refused at start (STATE_EXPOSED): say it here too.
	if (at !== stateDir) return undefined;
	try {
		checkStateDir(stateDir);
		return undefined;
	} catch (e) {
		return e instanceof CertificateeError ? e : undefined;
	}
}

function unwritable(stateDir: string, path: string, e: unknown): CertificateeError {
	const code = (e as NodeJS.ErrnoException).code ?? "error";
	const uid = process.getuid?.();
	const who = uid === undefined ? "this user" : `uid ${uid}`;
	const readOnly = code === "EROFS";
	return new CertificateeError(
		"STATE_UNWRITABLE",
		`state directory ${stateDir} is not writable by ${who}: ${path}: ${readOnly ? "read-only file system" : code}`,
		{
			context: { field: "state_dir", file: path },
			hint: readOnly
				? "under systemd, list state_dir in ReadWritePaths= (or use StateDirectory=certificatee: /var/lib/certificatee)"
				: `let ${who} write it (chown certificatee: ${stateDir}, mode 0700), or set state_dir to a directory it owns`,
			cause: e,
		},
	);
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
