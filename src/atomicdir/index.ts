/**
 * Atomic directory sync: a directory of files that readers never see half-updated, whatever happens to
 * the writer. One entry point, `syncDirectory`; `diffDirectory` is its read-only half (for plan).
 * See docs/atomic-directories.md for the reader contract.
 */
import { resolve } from "node:path";
import { CertificateeError, isCertificateeError } from "../errors.js";
import { contextFrom, type SyncContext } from "./context.js";
import { DIRECTORY_FLAGS, lstatAt, withFd, withFdAsync } from "./dirfd.js";
import { syncByExchange } from "./exchange.js";
import { openParent, removeStale } from "./fsutil.js";
import { lockFile, requireNative } from "./lock.js";
import { checkFileName, lockName, siblingsOf } from "./names.js";
import { type NativeBinding, probeExchangeAt, SyscallError } from "./renameat2.js";
import { isSymlinkLayoutAt, removeStaleInside, syncBySymlink } from "./symlink.js";
import type { DesiredFiles, SyncOptions, SyncResult } from "./types.js";

export { type DirectoryDiff, diffDirectory } from "./compare.js";
export { diffFile, type FileSyncOptions, type FileSyncResult, writeFileAtomic } from "./file.js";
export { checkFileName } from "./names.js";
export { type ExchangeSupport, type NativeBinding, probeExchange, SyscallError } from "./renameat2.js";
export { isSymlinkLayout } from "./symlink.js";
export type * from "./types.js";

/**
 * Makes `target` hold exactly `files` (names, bytes, modes). Idempotent: when it already does, nothing
 * is written (same inode, same mtime) and the result says "unchanged". Serialised across processes by
 * a lock file beside the target. Throws CertificateeError (ATOMICDIR_BAD_NAME, ATOMICDIR_UNSUPPORTED,
 * ATOMICDIR_SWAP_FAILED, ATOMICDIR_LOCKED) when nothing was published: the old content is then intact.
 * Problems after publishing (parent fsync, cleanup) come back in `result.problems`.
 */
export async function syncDirectory(
	target: string,
	files: DesiredFiles,
	options: SyncOptions = {},
): Promise<SyncResult> {
	const path = resolve(target);
	for (const name of Object.keys(files)) checkFileName(name, path);
	return underLock(path, options, async ({ siblings, fd, binding }) => {
		const parent = { path: siblings.parent, fd, name: siblings.base };
		const ctx = contextFrom(path, parent, siblings.stagingPrefix, files, binding, options);
		ctx.step("locked");
		const stale = removeStale(binding.at, parent, (n) => n.startsWith(siblings.stagingPrefix), path);
		const result = await syncWith(chooseSwap(ctx, options), ctx).catch((e: unknown) => {
			throw typed(e, path);
		});
		result.problems.unshift(...stale);
		return result;
	});
}

/**
 * A system call that failed in the middle of a sync (the target or a staging directory replaced under it by
 * another account, say) as the typed error every other failure of a sync is: nothing half was published.
 */
function typed(e: unknown, target: string): unknown {
	if (isCertificateeError(e) || !(e instanceof SyscallError)) return e;
	return new CertificateeError("ATOMICDIR_SWAP_FAILED", `cannot publish ${target}: ${e.message}`, {
		context: { target, file: e.path ?? target },
		hint: "the target or its parent changed under the sync, which stopped there; the next sync tries again. Check who else can write the parent directory",
		retryable: true,
		cause: e,
	});
}

/**
 * Runs `fn` with the target's parent open (a descriptor every step works relative to) and the target's lock
 * held; releases both whatever `fn` does.
 */
async function underLock<T>(
	path: string,
	options: SyncOptions,
	fn: (held: { siblings: ReturnType<typeof siblingsOf>; fd: number; binding: NativeBinding }) => Promise<T>,
): Promise<T> {
	const siblings = siblingsOf(path);
	const binding = options.binding ?? (await requireNative(path));
	return withFdAsync(openParent(siblings.parent, path, options.allowWritableParent ?? false), async (fd) => {
		const lock = await lockFile(
			fd,
			lockName(siblings),
			siblings.lock,
			path,
			options.lockTimeoutMs ?? 10_000,
			binding,
		);
		try {
			return await fn({ siblings, fd, binding });
		} finally {
			await lock.release();
		}
	});
}

async function syncWith(
	swap: "exchange" | "symlink" | "try-exchange",
	ctx: Parameters<typeof syncByExchange>[0],
) {
	if (swap === "symlink") return syncBySymlink(ctx);
	if (swap === "exchange") return syncByExchange(ctx);
	try {
		return await syncByExchange(ctx);
	} catch (e) {
		if (isCertificateeError(e, "ATOMICDIR_UNSUPPORTED")) return syncBySymlink(ctx);
		throw e;
	}
}

/** exchange-or-symlink: keep a symlink layout once chosen; probe only when the target does not exist yet. */
function chooseSwap(ctx: SyncContext, options: SyncOptions) {
	const swap = options.swap ?? "exchange";
	if (swap !== "exchange-or-symlink") return swap;
	if (lstatAt(ctx.at, ctx.parentFd, ctx.name) !== undefined) {
		return isSymlinkLayoutAt(ctx.at, ctx.parentFd, ctx.name) ? "symlink" : "try-exchange";
	}
	return probeExchangeAt(ctx.binding, ctx.parentFd).supported ? "exchange" : "symlink";
}

/**
 * What a start does before anything else: under the target's lock, removes staging directories and
 * symlink-layout leftovers of a killed run. The published content is not touched. Returns the problems.
 */
export async function removeStaleStaging(
	target: string,
	options: SyncOptions = {},
): Promise<CertificateeError[]> {
	const path = resolve(target);
	return underLock(path, options, async ({ siblings, fd, binding }) => {
		const parent = { path: siblings.parent, fd };
		const problems = removeStale(binding.at, parent, (n) => n.startsWith(siblings.stagingPrefix), path);
		if (isSymlinkLayoutAt(binding.at, fd, siblings.base)) {
			const inside = binding.at.open(fd, siblings.base, DIRECTORY_FLAGS);
			problems.push(...withFd(inside, (t) => removeStaleInside(binding.at, { fd: t, path })));
		}
		return problems;
	});
}
