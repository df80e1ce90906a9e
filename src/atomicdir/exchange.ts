/**
 * The exchange layout: build the whole new version in a sibling staging directory, fsync it, swap it
 * with the target in one renameat2(RENAME_EXCHANGE), fsync the parent, remove the old version.
 */
import type { Stats } from "node:fs";
import { fstatSync } from "node:fs";
import { join } from "node:path";
import { CertificateeError, describeError } from "../errors.js";
import { diffDirectoryAt } from "./compare.js";
import { currentTarget, directoryOwner, leftoverNote, type SyncContext, writeFailed } from "./context.js";
import { lstatAt, makeDirectoryAt, setModeAndOwner, syncFd, withFdAsync, writeNewFileAt } from "./dirfd.js";
import { removeOrReport } from "./fsutil.js";
import { randomTag } from "./names.js";
import { SyscallError, UNSUPPORTED_ERRNO } from "./renameat2.js";
import type { SyncResult } from "./types.js";

export async function syncByExchange(ctx: SyncContext): Promise<SyncResult> {
	const current = currentTarget(ctx);
	const diff = diffDirectoryAt(ctx.at, ctx.parentFd, ctx.name, ctx.files, {
		swap: "exchange",
		dirMode: ctx.dirMode,
		owner: ctx.owner,
	});
	const base = { target: ctx.target, swap: "exchange" as const, first: current === undefined };
	if (diff.differences.length === 0) return { ...base, status: "unchanged", differences: [], problems: [] };
	if (current !== undefined) refuseMountPoint(ctx, current);

	const staging = `${ctx.stagingPrefix}${randomTag()}`;
	const parent = { fd: ctx.parentFd, path: ctx.parent };
	const made = await writeStaging(ctx, staging, current);
	try {
		// Names in the open parent: a symlink swapped in at either name is exchanged itself, never followed.
		if (current === undefined) ctx.at.rename(ctx.parentFd, staging, ctx.parentFd, ctx.name);
		else ctx.binding.exchange(ctx.parentFd, staging, ctx.name);
	} catch (e) {
		throw swapError(ctx, e, removeOrReport(ctx.at, parent, staging, ctx.target));
	}
	ctx.step("swapped");
	if (current !== undefined)
		checkPublished(ctx, made, () => removeOrReport(ctx.at, parent, staging, ctx.target));
	else checkPublished(ctx, made, () => []);
	const problems: CertificateeError[] = [];
	await syncFd(ctx.parentFd, ctx.durable).catch((e: unknown) => problems.push(parentSyncError(ctx, e)));
	ctx.step("parent-synced");
	if (current !== undefined) problems.push(...removeOrReport(ctx.at, parent, staging, ctx.target));
	ctx.step("cleaned");
	return { ...base, status: "written", differences: diff.differences, problems };
}

/**
 * A complete, fsync'd copy of the new version, made and filled through its own descriptor; its mode and
 * owner are set last. On failure the staging dir is gone and the target untouched.
 */
async function writeStaging(ctx: SyncContext, staging: string, current: Stats | undefined): Promise<Stats> {
	try {
		const mode = ctx.dirMode ?? (current === undefined ? 0o755 : current.mode & 0o7777);
		const fd = makeDirectoryAt(ctx.at, ctx.parentFd, staging, join(ctx.parent, staging));
		const made = fstatSync(fd);
		ctx.step("staging-created");
		await withFdAsync(fd, async (dir) => {
			for (const [name, file] of Object.entries(ctx.files)) {
				await writeNewFileAt(ctx.at, dir, name, file, ctx.owner, ctx.durable);
				ctx.step("file-written");
			}
			setModeAndOwner(dir, mode, directoryOwner(ctx, current));
			await syncFd(dir, ctx.durable);
		});
		ctx.step("staging-synced");
		return made;
	} catch (e) {
		throw writeFailed(
			ctx,
			`cannot write the new version of ${ctx.target}`,
			e,
			removeOrReport(ctx.at, { fd: ctx.parentFd, path: ctx.parent }, staging, ctx.target),
		);
	}
}

/**
 * What now sits at the target's name must be the directory certificatee made: in a parent another account
 * may write (allow_writable_parent), that account can rename a symlink of its own into the staging name
 * just before the exchange, which then publishes the link. Never reported as written.
 */
export function checkPublished(ctx: SyncContext, made: Stats, cleanup: () => CertificateeError[]): void {
	const now = lstatAt(ctx.at, ctx.parentFd, ctx.name);
	if (now !== undefined && now.ino === made.ino && now.dev === made.dev) return;
	throw new CertificateeError(
		"ATOMICDIR_UNSAFE_PARENT",
		`${ctx.target} was replaced by another account while certificatee published it: what is there now is not what certificatee wrote${leftoverNote(cleanup())}`,
		{
			context: { target: ctx.target, file: ctx.parent },
			hint: "someone else writes the target's parent; find out who, and make the parent root's or certificatee's only (docs/security.md)",
			retryable: true,
		},
	);
}

/** A mount point can't be renamed over (EBUSY): say so before writing anything. */
function refuseMountPoint(ctx: SyncContext, current: Stats): void {
	const parent = fstatSync(ctx.parentFd);
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
