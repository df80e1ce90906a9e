/**
 * The symlink layout (kubelet AtomicWriter): the target is a real directory holding versioned
 * directories `..<stamp>.<random>`, a `..data` symlink to the current one, flipped by rename, and one
 * stable symlink per file (`tls.crt` -> `..data/tls.crt`). Pure rename(2), so it works on filesystems
 * without RENAME_EXCHANGE and on mount points. A first sync builds the whole layout in a sibling
 * staging directory and renames it into place.
 */
import type { Stats } from "node:fs";
import { chmodSync, chownSync, lstatSync, readdirSync, renameSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { diffDirectory, readlinkOrUndefined } from "./compare.js";
import { currentTarget, directoryOwner, type SyncContext, writeFailed } from "./context.js";
import {
	cleanupError,
	makeDirectory,
	remove,
	removeOrReport,
	removeStale,
	syncDirectoryEntry,
	writeNewFile,
} from "./fsutil.js";
import { DATA_LINK, DATA_LINK_TMP, randomTag, versionName } from "./names.js";
import type { SyncResult } from "./types.js";

const LINK_TMP_SUFFIX = ".atomicdir-link";

export async function syncBySymlink(ctx: SyncContext): Promise<SyncResult> {
	const current = currentTarget(ctx);
	const problems = current === undefined ? [] : removeStaleInside(ctx.target);
	const diff = await diffDirectory(ctx.target, ctx.files, {
		swap: "symlink",
		dirMode: ctx.dirMode,
		owner: ctx.owner,
	});
	const base = { target: ctx.target, swap: "symlink" as const, first: current === undefined };
	if (diff.differences.length === 0) return { ...base, status: "unchanged", differences: [], problems };
	const mode = ctx.dirMode ?? (current === undefined ? 0o755 : current.mode & 0o7777);
	if (current === undefined) await firstSync(ctx, mode);
	else problems.push(...(await nextVersion(ctx, mode, current)));
	return { ...base, status: "written", differences: diff.differences, problems };
}

async function firstSync(ctx: SyncContext, mode: number): Promise<void> {
	const staging = join(ctx.parent, `${ctx.stagingPrefix}${randomTag()}`);
	try {
		makeDirectory(staging, mode, ctx.owner);
		ctx.step("staging-created");
		await writeVersion(ctx, staging, mode);
		linkFiles(ctx, staging);
		await syncDirectoryEntry(staging, ctx.durable);
		renameSync(staging, ctx.target);
	} catch (e) {
		throw writeFailed(ctx, `cannot create ${ctx.target}`, e, removeOrReport(staging, ctx.target));
	}
	ctx.step("swapped");
	await syncDirectoryEntry(ctx.parent, ctx.durable);
	ctx.step("parent-synced");
}

async function nextVersion(ctx: SyncContext, mode: number, current: Stats) {
	const version = await writeVersion(ctx, ctx.target, mode).catch((e: unknown) => {
		throw writeFailed(ctx, `cannot write a new version in ${ctx.target}`, e);
	});
	ctx.step("swapped");
	try {
		linkFiles(ctx, ctx.target);
		// The target itself stays (only its content is versioned): fix its own mode and owner in place.
		if ((current.mode & 0o7777) !== mode) chmodSync(ctx.target, mode);
		const owner = ctx.owner;
		if (owner !== undefined && (current.uid !== owner.uid || current.gid !== owner.gid)) {
			chownSync(ctx.target, owner.uid, owner.gid);
		}
	} catch (e) {
		throw writeFailed(ctx, `new version of ${ctx.target} is live but its file links are not`, e);
	}
	ctx.step("links-updated");
	const problems = removeStale(ctx.target, (n) => isUnwanted(ctx, n, version), ctx.target);
	await syncDirectoryEntry(ctx.target, ctx.durable).catch((e: unknown) =>
		problems.push(cleanupError(ctx.target, ctx.target, e)),
	);
	ctx.step("cleaned");
	return problems;
}

/** Writes a version dir in `dir` and flips `..data` to it; returns the version name. */
async function writeVersion(ctx: SyncContext, dir: string, mode: number): Promise<string> {
	const version = versionName(ctx.now);
	const path = join(dir, version);
	makeDirectory(path, mode, directoryOwner(ctx, undefined));
	if (dir === ctx.target) ctx.step("staging-created");
	for (const [name, file] of Object.entries(ctx.files)) {
		await writeNewFile(join(path, name), file, ctx.owner, ctx.durable);
		ctx.step("file-written");
	}
	await syncDirectoryEntry(path, ctx.durable);
	ctx.step("staging-synced");
	remove(join(dir, DATA_LINK_TMP));
	symlinkSync(version, join(dir, DATA_LINK_TMP));
	renameSync(join(dir, DATA_LINK_TMP), join(dir, DATA_LINK));
	await syncDirectoryEntry(dir, ctx.durable);
	ctx.step("data-flipped");
	return version;
}

/** Makes every file name a symlink into `..data`, each replaced by one rename. */
function linkFiles(ctx: SyncContext, dir: string): void {
	for (const name of Object.keys(ctx.files)) {
		const want = `${DATA_LINK}/${name}`;
		if (readlinkOrUndefined(join(dir, name)) === want) continue;
		const tmp = join(dir, `.${name}${LINK_TMP_SUFFIX}`);
		remove(tmp);
		symlinkSync(want, tmp);
		renameSync(tmp, join(dir, name));
	}
}

function isUnwanted(ctx: SyncContext, name: string, version: string): boolean {
	if (name === DATA_LINK || name === version) return false;
	if (name.startsWith("..")) return true;
	return !Object.hasOwn(ctx.files, name);
}

/** Leftovers of a killed run inside the target: `..data_tmp`, link temps, versions `..data` doesn't name. */
export function removeStaleInside(target: string) {
	const live = readlinkOrUndefined(join(target, DATA_LINK));
	const names = readdirSync(target);
	const stale = new Set<string>();
	for (const name of names) {
		if (name === DATA_LINK || name === live) continue;
		if (name.startsWith("..") || name.endsWith(LINK_TMP_SUFFIX)) stale.add(name);
	}
	if (stale.size === 0) return [];
	return removeStale(target, (n) => stale.has(n), target);
}

export function isSymlinkLayout(target: string): boolean {
	try {
		return lstatSync(join(target, DATA_LINK)).isSymbolicLink();
	} catch {
		return false;
	}
}
