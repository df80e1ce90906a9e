/**
 * The only native code certificatee calls: libc `renameat2(RENAME_EXCHANGE)`, `flock` and the `*at` calls
 * that work relative to a directory descriptor (openat, mkdirat, unlinkat, symlinkat, readlinkat), through
 * koffi (pinned 3.3.4: prebuilt binaries, nothing compiled on install). Node has no `*at` calls, and a path
 * is resolved again by every call: between two calls another account that can write a directory on the
 * way can swap a name for a symlink (docs/security.md). Kept in this one module so a wrong prototype can
 * only live here; `probeExchange` checks at runtime that the exchange really works on a given filesystem
 * before anyone relies on it.
 */
import { closeSync, constants, openSync } from "node:fs";

const RENAME_EXCHANGE = 2;
/** unlinkat: remove a directory (rmdir) instead of a file. */
export const AT_REMOVEDIR = 0x200;
/** Not in node:fs constants; the same on x86-64, arm64 and the other generic Linux ABIs. */
export const O_CLOEXEC = 0o2000000;
export const O_PATH = 0o10000000;
export const LOCK_EX = 2;
export const LOCK_NB = 4;
export const LOCK_UN = 8;

/** errno values that mean "this filesystem or platform can't exchange", not "something went wrong". */
export const UNSUPPORTED_ERRNO = new Set(["EINVAL", "EXDEV", "ENOSYS", "EBUSY", "ENOTSUP", "EOPNOTSUPP"]);

/** A failed call, shaped like Node's fs errors (`code`, `errno`, `syscall`, `path`, `dest`). */
export class SyscallError extends Error {
	readonly code: string;
	readonly errno: number;
	readonly syscall: string;
	readonly path: string | undefined;
	readonly dest: string | undefined;
	constructor(syscall: string, code: string, errno: number, path?: string, dest?: string) {
		super(
			`${code}: ${syscall}${path === undefined ? "" : ` '${path}'`}${dest === undefined ? "" : ` -> '${dest}'`}`,
		);
		this.code = code;
		this.errno = errno;
		this.syscall = syscall;
		this.path = path;
		this.dest = dest;
	}
}

/** Calls relative to an open directory `dir` (a descriptor); `name` is one plain name in it. Throw SyscallError. */
export interface AtCalls {
	/** openat(2); `mode` matters with O_CREAT only. Returns the new descriptor. */
	open(dir: number, name: string, flags: number, mode?: number): number;
	mkdir(dir: number, name: string, mode: number): void;
	/** unlinkat(2): a file or symlink, or an empty directory with AT_REMOVEDIR. */
	unlink(dir: number, name: string, flags: number): void;
	/** renameat(2) within or across open directories; never follows a symlink at either name. */
	rename(fromDir: number, from: string, toDir: number, to: string): void;
	/** symlinkat(2): creates `name` in `dir` pointing at `target` (never resolved here). */
	symlink(target: string, dir: number, name: string): void;
	/** readlinkat(2); throws EINVAL when `name` is not a symlink. */
	readlink(dir: number, name: string): string;
}

/** What the rest of atomicdir needs from the OS beyond node:fs. Tests inject faults by replacing `exchange`. */
export interface NativeBinding {
	/** Atomically swaps two existing names in the open directory `dir` (both must exist). Throws SyscallError. */
	exchange(dir: number, a: string, b: string): void;
	/** flock(2) on an open file descriptor; returns false when LOCK_NB was given and the lock is taken. */
	flock(fd: number, operation: number): boolean;
	at: AtCalls;
}

type Loaded = { ok: true; binding: NativeBinding } | { ok: false; reason: string };
let loaded: Promise<Loaded> | undefined;

/** Loads libc once per process. Never throws: on failure says why (non-Linux, koffi missing, ...). */
export function loadNativeBinding(): Promise<Loaded> {
	loaded ??= load();
	return loaded;
}

async function load(): Promise<Loaded> {
	if (process.platform !== "linux") {
		return { ok: false, reason: `renameat2 exists only on Linux; this is ${process.platform} (ENOSYS)` };
	}
	try {
		const koffi = (await import("koffi")).default;
		const libc = koffi.load("libc.so.6");
		const renameat2 = libc.func("int renameat2(int, const char *, int, const char *, unsigned int)");
		const flock = libc.func("int flock(int, int)");
		const openat = libc.func("int openat(int, const char *, int, ...)");
		const mkdirat = libc.func("int mkdirat(int, const char *, unsigned int)");
		const unlinkat = libc.func("int unlinkat(int, const char *, int)");
		const symlinkat = libc.func("int symlinkat(const char *, int, const char *)");
		const readlinkat = libc.func("long readlinkat(int, const char *, _Out_ uint8_t *, size_t)");
		const names = new Map<number, string>(Object.entries(koffi.os.errno).map(([name, no]) => [no, name]));
		const fail = (syscall: string, path?: string, dest?: string): SyscallError => {
			const no = koffi.errno();
			return new SyscallError(syscall, names.get(no) ?? `ERRNO${no}`, no, path, dest);
		};
		const check = (rc: number, syscall: string, path?: string, dest?: string) => {
			if (rc < 0) throw fail(syscall, path, dest);
			return rc;
		};
		const at: AtCalls = {
			open: (dir, name, flags, mode = 0) =>
				check(openat(dir, name, flags, "unsigned int", mode), "openat", name),
			mkdir: (dir, name, mode) => void check(mkdirat(dir, name, mode), "mkdirat", name),
			unlink: (dir, name, flags) => void check(unlinkat(dir, name, flags), "unlinkat", name),
			rename: (fromDir, from, toDir, to) =>
				void check(renameat2(fromDir, from, toDir, to, 0), "renameat", from, to),
			symlink: (target, dir, name) => void check(symlinkat(target, dir, name), "symlinkat", name),
			readlink(dir, name) {
				const buffer = Buffer.alloc(4096);
				const n = check(Number(readlinkat(dir, name, buffer, buffer.length)), "readlinkat", name);
				return buffer.subarray(0, n).toString("utf8");
			},
		};
		const binding: NativeBinding = {
			exchange(dir, a, b) {
				const rc: number = renameat2(dir, a, dir, b, RENAME_EXCHANGE);
				if (rc !== 0) throw fail("renameat2", a, b);
			},
			at,
			flock(fd, operation) {
				const rc: number = flock(fd, operation);
				if (rc === 0) return true;
				const error = fail("flock");
				if (error.code === "EWOULDBLOCK" || error.code === "EAGAIN") return false;
				throw error;
			},
		};
		return { ok: true, binding };
	} catch (e) {
		return {
			ok: false,
			reason: `cannot call libc through koffi: ${e instanceof Error ? e.message : String(e)}`,
		};
	}
}

export type ExchangeSupport = { supported: true } | { supported: false; code: string; reason: string };

/**
 * Exchanges two fresh empty directories inside `dir` (the parent of a target) and removes them.
 * Tells whether RENAME_EXCHANGE works on that filesystem; the errno is kept for the error message.
 */
export async function probeExchange(dir: string, binding?: NativeBinding): Promise<ExchangeSupport> {
	const native = binding ?? (await nativeOrReason());
	if (typeof native === "string") return { supported: false, code: "ENOSYS", reason: native };
	let fd: number;
	try {
		fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
	} catch (e) {
		return { supported: false, code: (e as NodeJS.ErrnoException).code ?? "UNKNOWN", reason: String(e) };
	}
	try {
		return probeExchangeAt(native, fd);
	} finally {
		closeSync(fd);
	}
}

/** probeExchange in the open directory `dir`. */
export function probeExchangeAt(native: NativeBinding, dir: number): ExchangeSupport {
	const tag = `.atomicdir-probe-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
	let support: ExchangeSupport = { supported: true };
	try {
		native.at.mkdir(dir, `${tag}-a`, 0o700);
		native.at.mkdir(dir, `${tag}-b`, 0o700);
		native.exchange(dir, `${tag}-a`, `${tag}-b`);
	} catch (e) {
		const code = e instanceof SyscallError ? e.code : ((e as NodeJS.ErrnoException).code ?? "UNKNOWN");
		support = { supported: false, code, reason: e instanceof Error ? e.message : String(e) };
	}
	for (const side of ["a", "b"]) {
		try {
			native.at.unlink(dir, `${tag}-${side}`, AT_REMOVEDIR);
		} catch (e) {
			// ENOENT: never made (the first mkdirat failed).
			if (!(e instanceof SyscallError && e.code === "ENOENT")) throw e;
		}
	}
	return support;
}

async function nativeOrReason(): Promise<NativeBinding | string> {
	const l = await loadNativeBinding();
	return l.ok ? l.binding : l.reason;
}
