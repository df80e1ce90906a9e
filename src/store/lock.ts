/**
 * One certificatee process per state directory. The lock is flock(2) on `<state_dir>/.lock`, taken with
 * LOCK_NB: the kernel drops it when the process exits in any way (kill -9 included), so there is never a stale
 * lock to clean up, and a reused pid cannot fool it. The file also holds the owner's pid for the error message.
 * flock is reached through koffi (libc is looked up in the running process, so glibc, musl and macOS all work).
 * Network filesystems that do not implement flock are not supported for the state directory.
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import koffi from "koffi";
import { CertificateeError } from "../errors.js";

const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;

type Flock = (fd: number, op: number) => number;
let flockFn: Flock | undefined;
function flock(): Flock {
	flockFn ??= koffi.load(null).func("int flock(int fd, int op)") as Flock;
	return flockFn;
}

export interface StateLock {
	readonly path: string;
	release(): void;
}

/** Takes the state directory's lock or throws STATE_LOCKED naming the process that holds it. */
export function acquireStateLock(stateDir: string): StateLock {
	mkdirSync(stateDir, { recursive: true, mode: 0o700 });
	const path = join(stateDir, ".lock");
	const fd = openSync(path, "a+", 0o600);
	if (flock()(fd, LOCK_EX | LOCK_NB) !== 0) {
		const errno = koffi.errno();
		closeSync(fd);
		if (errno !== koffi.os.errno.EWOULDBLOCK && errno !== koffi.os.errno.EAGAIN) {
			throw new CertificateeError(
				"STATE_LOCKED",
				`cannot lock state directory ${stateDir} (errno ${errno})`,
				{
					context: { file: path },
					hint: "the state directory must be on a local filesystem that supports flock",
				},
			);
		}
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
			flock()(fd, LOCK_UN);
			closeSync(fd);
		},
	};
}

function readOwner(path: string): string | undefined {
	try {
		const pid = readFileSync(path, "utf8").trim();
		return /^\d+$/.test(pid) ? pid : undefined;
	} catch {
		return undefined;
	}
}
