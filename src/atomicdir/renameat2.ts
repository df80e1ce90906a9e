/**
 * The only native code certificatee calls: libc `renameat2(RENAME_EXCHANGE)` and `flock`, through koffi
 * (pinned 3.3.4: prebuilt binaries, nothing compiled on install). Kept in this one module so a wrong
 * prototype can only live here; `probeExchange` checks at runtime that the exchange really works on a
 * given filesystem before anyone relies on it.
 */
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";

const AT_FDCWD = -100;
const RENAME_EXCHANGE = 2;
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

/** What the rest of atomicdir needs from the OS beyond node:fs. Tests inject faults by replacing `exchange`. */
export interface NativeBinding {
	/** Atomically swaps two existing paths (both must exist). Throws SyscallError. */
	exchange(a: string, b: string): void;
	/** flock(2) on an open file descriptor; returns false when LOCK_NB was given and the lock is taken. */
	flock(fd: number, operation: number): boolean;
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
		const names = new Map<number, string>(Object.entries(koffi.os.errno).map(([name, no]) => [no, name]));
		const fail = (syscall: string, path?: string, dest?: string): SyscallError => {
			const no = koffi.errno();
			return new SyscallError(syscall, names.get(no) ?? `ERRNO${no}`, no, path, dest);
		};
		const binding: NativeBinding = {
			exchange(a, b) {
				const rc: number = renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
				if (rc !== 0) throw fail("renameat2", a, b);
			},
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
	const tag = `.atomicdir-probe-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
	const a = join(dir, `${tag}-a`);
	const b = join(dir, `${tag}-b`);
	try {
		await mkdir(a);
		await mkdir(b);
		native.exchange(a, b);
		return { supported: true };
	} catch (e) {
		const code = e instanceof SyscallError ? e.code : ((e as NodeJS.ErrnoException).code ?? "UNKNOWN");
		return { supported: false, code, reason: e instanceof Error ? e.message : String(e) };
	} finally {
		await rm(a, { recursive: true, force: true });
		await rm(b, { recursive: true, force: true });
	}
}

async function nativeOrReason(): Promise<NativeBinding | string> {
	const l = await loadNativeBinding();
	return l.ok ? l.binding : l.reason;
}
