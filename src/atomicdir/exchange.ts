/**
 * The exchange layout: build the whole new version in a sibling staging directory, fsync it, swap it
 * with the target in one renameat2(RENAME_EXCHANGE), fsync the parent, remove the old version.
 */
import type { Stats } from "node:fs";
import { renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { CertificateeError, describeError } from "../errors.js";
import { diffDirectory } from "./compare.js";
import { currentTarget, directoryOwner, leftoverNote, type SyncContext, writeFailed } from "./context.js";
import { makeDirectory, removeOrReport, syncDirectoryEntry, writeNewFile } from "./fsutil.js";
import { randomTag } from "./names.js";
import { SyscallError, UNSUPPORTED_ERRNO } from "./renameat2.js";
import type { SyncResult } from "./types.js";

export async function syncByExchange(ctx: SyncContext): Promise<SyncResult> {
	const current = currentTarget(ctx);
	const diff = await diffDirectory(ctx.target, ctx.files, {
		swap: "exchange",
		dirMode: ctx.dirMode,
		owner: ctx.owner,
	});
	const base = { target: ctx.target, swap: "exchange" as const, first: current === undefined };
	if (diff.differences.length === 0) return { ...base, status: "unchanged", differences: [], problems: [] };
	if (current !== undefined) refuseMountPoint(ctx, current);

	const staging = join(ctx.parent, `${ctx.stagingPrefix}${randomTag()}`);
	await writeStaging(ctx, staging, current);
	try {
		if (current === undefined) renameSync(staging, ctx.target);
		else ctx.binding.exchange(staging, ctx.target);
	} catch (e) {
		throw swapError(ctx, e, removeOrReport(staging, ctx.target));
	}
	ctx.step("swapped");
	const problems: CertificateeError[] = [];
	await syncDirectoryEntry(ctx.parent, ctx.durable).catch((e: unknown) =>
		problems.push(parentSyncError(ctx, e)),
	);
	ctx.step("parent-synced");
	if (current !== undefined) problems.push(...removeOrReport(staging, ctx.target));
	ctx.step("cleaned");
	return { ...base, status: "written", differences: diff.differences, problems };
}

/** A complete, fsync'd copy of the new version; on failure the staging dir is gone and the target untouched. */
async function writeStaging(ctx: SyncContext, staging: string, current: Stats | undefined): Promise<void> {
	try {
		const mode = ctx.dirMode ?? (current === undefined ? 0o755 : current.mode & 0o7777);
		makeDirectory(staging, mode, directoryOwner(ctx, current));
		ctx.step("staging-created");
		for (const [name, file] of Object.entries(ctx.files)) {
			await writeNewFile(join(staging, name), file, ctx.owner, ctx.durable);
			ctx.step("file-written");
		}
		await syncDirectoryEntry(staging, ctx.durable);
		ctx.step("staging-synced");
	} catch (e) {
		throw writeFailed(
			ctx,
			`cannot write the new version of ${ctx.target}`,
			e,
			removeOrReport(staging, ctx.target),
		);
	}
}

/** A mount point can't be renamed over (EBUSY): say so before writing anything. */
function refuseMountPoint(ctx: SyncContext, current: Stats): void {
	const parent = statSync(ctx.parent);
	if (parent.dev !== current.dev) throw unsupported(ctx, "EBUSY", "the target is a mount point");
}

const EXPLAIN: Record<string, string> = {
	EXDEV:
		"the target is on another filesystem than its parent (an overlay lower layer, e.g. baked into an image)",
	EINVAL: "the filesystem does not support RENAME_EXCHANGE (some FUSE and network filesystems)",
	EBUSY: "the target is a mount point",
	ENOSYS: "the kernel or platform has no renameat2",
	ENOTSUP: "the filesystem does not support RENAME_EXCHANGE",
	EOPNOTSUPP: "the filesystem does not support RENAME_EXCHANGE",
};

function swapError(ctx: SyncContext, e: unknown, leftovers: CertificateeError[]): CertificateeError {
	if (e instanceof SyscallError && UNSUPPORTED_ERRNO.has(e.code)) {
		return unsupported(ctx, e.code, EXPLAIN[e.code] ?? "exchange not supported", e, leftovers);
	}
	return writeFailed(ctx, `cannot publish the new version of ${ctx.target}`, e, leftovers);
}

export function unsupported(
	ctx: SyncContext,
	code: string,
	why: string,
	cause?: unknown,
	leftovers: CertificateeError[] = [],
): CertificateeError {
	return new CertificateeError(
		"ATOMICDIR_UNSUPPORTED",
		`cannot swap ${ctx.target} atomically: ${why} (${code}); old content kept${leftoverNote(leftovers)}`,
		{
			context: { target: ctx.target, operation: "renameat2(RENAME_EXCHANGE)" },
			hint:
				code === "EBUSY"
					? "mount the parent directory instead of the target itself, or set swap: symlink on this target"
					: "set swap: symlink (or exchange-or-symlink) on this target, or move it to ext4, xfs, btrfs or tmpfs",
			cause,
		},
	);
}

function parentSyncError(ctx: SyncContext, e: unknown): CertificateeError {
	return new CertificateeError(
		"ATOMICDIR_SWAP_FAILED",
		`new version of ${ctx.target} is live, but fsync of ${ctx.parent} failed: ${describeError(e)}`,
		{ context: { target: ctx.target, file: ctx.parent }, hint: "it may not survive a power loss", cause: e },
	);
}
