/**
 * Atomic directory sync: a directory of files that readers never see half-updated, whatever happens to
 * the writer. One entry point, `syncDirectory`; `diffDirectory` is its read-only half (for plan).
 * See docs/atomic-directories.md for the reader contract.
 */
import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { CertificateeError, describeError, isCertificateeError } from "../errors.js";
import { contextFrom } from "./context.js";
import { syncByExchange } from "./exchange.js";
import { removeStale } from "./fsutil.js";
import { lockFile, requireNative } from "./lock.js";
import { checkFileName, siblingsOf } from "./names.js";
import { type NativeBinding, probeExchange } from "./renameat2.js";
import { isSymlinkLayout, removeStaleInside, syncBySymlink } from "./symlink.js";
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
	const siblings = siblingsOf(path);
	await requireParent(siblings.parent, path);
	const binding = options.binding ?? (await requireNative(path));
	const lock = await lockFile(siblings.lock, path, options.lockTimeoutMs ?? 10_000, binding);
	try {
		const ctx = contextFrom(path, siblings.parent, siblings.stagingPrefix, files, binding, options);
		ctx.step("locked");
		const stale = removeStale(siblings.parent, (n) => n.startsWith(siblings.stagingPrefix), path);
		const result = await syncWith(await chooseSwap(ctx.target, options, binding), ctx);
		result.problems.unshift(...stale);
		return result;
	} finally {
		await lock.release();
	}
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
async function chooseSwap(target: string, options: SyncOptions, binding: NativeBinding) {
	const swap = options.swap ?? "exchange";
	if (swap !== "exchange-or-symlink") return swap;
	const exists = await stat(target).then(
		() => true,
		() => false,
	);
	if (exists) return isSymlinkLayout(target) ? "symlink" : "try-exchange";
	const probe = await probeExchange(siblingsOf(target).parent, binding);
	return probe.supported ? "exchange" : "symlink";
}

async function requireParent(parent: string, target: string): Promise<void> {
	const st = await stat(parent).catch((e: unknown) => {
		throw new CertificateeError(
			"ATOMICDIR_SWAP_FAILED",
			`parent directory ${parent} is missing: ${describeError(e)}`,
			{
				context: { target, file: parent },
				hint: "create the parent directory; certificatee creates only the target itself",
				cause: e,
			},
		);
	});
	if (!st.isDirectory()) {
		throw new CertificateeError("ATOMICDIR_SWAP_FAILED", `parent ${parent} is not a directory`, {
			context: { target, file: parent },
			hint: "point the target into an existing directory",
		});
	}
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
	const siblings = siblingsOf(path);
	await requireParent(siblings.parent, path);
	const binding = options.binding ?? (await requireNative(path));
	const lock = await lockFile(siblings.lock, path, options.lockTimeoutMs ?? 10_000, binding);
	try {
		const problems = removeStale(siblings.parent, (n) => n.startsWith(siblings.stagingPrefix), path);
		if (isSymlinkLayout(path)) problems.push(...removeStaleInside(path));
		return problems;
	} finally {
		await lock.release();
	}
}
