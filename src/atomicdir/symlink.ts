/**
 * The symlink layout (kubelet AtomicWriter): the target is a real directory holding versioned
 * directories `..<stamp>.<random>`, a `..data` symlink to the current one, flipped by rename, and one
 * stable symlink per file (`tls.crt` -> `..data/tls.crt`). Pure rename(2), so it works on filesystems
 * without RENAME_EXCHANGE and on mount points. A first sync builds the whole layout in a sibling
 * staging directory and renames it into place. The target is opened once (never through a symlink) and
 * everything inside is done through that descriptor: its owner, when configured, may write in it.
 */
import { fstatSync, lstatSync, type Stats } from "node:fs";
import { join } from "node:path";
import { diffDirectoryAt } from "./compare.js";
import { currentTarget, directoryOwner, type SyncContext, writeFailed } from "./context.js";
import {
	DIRECTORY_FLAGS,
	listAt,
	lstatAt,
	makeDirectoryAt,
	readlinkAt,
	removeAt,
	setModeAndOwner,
	syncFd,
	withFd,
	withFdAsync,
	writeNewFileAt,
} from "./dirfd.js";
import { checkPublished } from "./exchange.js";
import { cleanupError, removeOrReport, removeStale } from "./fsutil.js";
import { DATA_LINK, DATA_LINK_TMP, randomTag, versionName } from "./names.js";
import type { AtCalls } from "./renameat2.js";
import type { SyncResult } from "./types.js";

const LINK_TMP_SUFFIX = ".atomicdir-link";

export async function syncBySymlink(ctx: SyncContext): Promise<SyncResult> {
	const current = currentTarget(ctx);
	const base = { target: ctx.target, swap: "symlink" as const, first: current === undefined };
	if (current === undefined) {
		const mode = ctx.dirMode ?? 0o755;
		await firstSync(ctx, mode);
		const differences = ["target does not exist"];
		return { ...base, status: "written", differences, problems: [] };
	}
	const fd = openTarget(ctx);
	return withFdAsync(fd, async (target) => {
		const dir = { fd: target, path: ctx.target };
		const problems = removeStaleInside(ctx.at, dir);
		const diff = diffDirectoryAt(ctx.at, ctx.parentFd, ctx.name, ctx.files, {
			swap: "symlink",
			dirMode: ctx.dirMode,
			owner: ctx.owner,
		});
		if (diff.differences.length === 0) return { ...base, status: "unchanged", differences: [], problems };
		const mode = ctx.dirMode ?? current.mode & 0o7777;
		problems.push(...(await nextVersion(ctx, dir, mode)));
		return { ...base, status: "written", differences: diff.differences, problems };
	});
}

/** The existing target, opened without following a symlink. */
function openTarget(ctx: SyncContext): number {
	try {
		return ctx.at.open(ctx.parentFd, ctx.name, DIRECTORY_FLAGS);
	} catch (e) {
		throw writeFailed(ctx, `cannot open ${ctx.target} (it changed while certificatee read it)`, e);
	}
}

async function firstSync(ctx: SyncContext, mode: number): Promise<void> {
	const staging = `${ctx.stagingPrefix}${randomTag()}`;
	const parent = { fd: ctx.parentFd, path: ctx.parent };
	let made: Stats;
	try {
		const fd = makeDirectoryAt(ctx.at, ctx.parentFd, staging, join(ctx.parent, staging));
		made = fstatSync(fd);
		ctx.step("staging-created");
		await withFdAsync(fd, async (dir) => {
			await writeVersion(ctx, dir, mode);
			linkFiles(ctx.at, ctx, dir);
			setModeAndOwner(dir, mode, ctx.owner);
			await syncFd(dir, ctx.durable);
		});
		ctx.at.rename(ctx.parentFd, staging, ctx.parentFd, ctx.name);
	} catch (e) {
		throw writeFailed(
			ctx,
			`cannot create ${ctx.target}`,
			e,
			removeOrReport(ctx.at, parent, staging, ctx.target),
		);
	}
	ctx.step("swapped");
	checkPublished(ctx, made, () => []);
	await syncFd(ctx.parentFd, ctx.durable);
	ctx.step("parent-synced");
}

async function nextVersion(ctx: SyncContext, dir: { fd: number; path: string }, mode: number) {
	const version = await writeVersion(ctx, dir.fd, mode, true).catch((e: unknown) => {
		throw writeFailed(ctx, `cannot write a new version in ${ctx.target}`, e);
	});
	ctx.step("swapped");
	try {
		linkFiles(ctx.at, ctx, dir.fd);
		// The target itself stays (only its content is versioned): fix its own mode and owner on its descriptor.
		const current = fstatSync(dir.fd);
		if ((current.mode & 0o7777) !== mode) setModeAndOwner(dir.fd, mode, undefined);
		const owner = ctx.owner;
		if (owner !== undefined && (current.uid !== owner.uid || current.gid !== owner.gid)) {
			setModeAndOwner(dir.fd, mode, owner);
		}
	} catch (e) {
		throw writeFailed(ctx, `new version of ${ctx.target} is live but its file links are not`, e);
	}
	ctx.step("links-updated");
	const problems = removeStale(ctx.at, dir, (n) => isUnwanted(ctx, n, version), ctx.target);
	await syncFd(dir.fd, ctx.durable).catch((e: unknown) =>
		problems.push(cleanupError(ctx.target, ctx.target, e)),
	);
	ctx.step("cleaned");
	return problems;
}

/** Writes a version dir in the open directory `dir` and flips `..data` to it; returns the version name. */
async function writeVersion(ctx: SyncContext, dir: number, mode: number, inTarget = false): Promise<string> {
	const version = versionName(ctx.now);
	const fd = makeDirectoryAt(ctx.at, dir, version, join(ctx.target, version));
	if (inTarget) ctx.step("staging-created");
	await withFdAsync(fd, async (v) => {
		for (const [name, file] of Object.entries(ctx.files)) {
			await writeNewFileAt(ctx.at, v, name, file, ctx.owner, ctx.durable);
			ctx.step("file-written");
		}
		setModeAndOwner(v, mode, directoryOwner(ctx, undefined));
		await syncFd(v, ctx.durable);
	});
	ctx.step("staging-synced");
	removeAt(ctx.at, dir, DATA_LINK_TMP);
	ctx.at.symlink(version, dir, DATA_LINK_TMP);
	ctx.at.rename(dir, DATA_LINK_TMP, dir, DATA_LINK);
	await syncFd(dir, ctx.durable);
	ctx.step("data-flipped");
	return version;
}

/** Makes every file name a symlink into `..data`, each replaced by one rename. */
function linkFiles(at: AtCalls, ctx: SyncContext, dir: number): void {
	for (const name of Object.keys(ctx.files)) {
		const want = `${DATA_LINK}/${name}`;
		if (readlinkAt(at, dir, name) === want) continue;
		const tmp = `.${name}${LINK_TMP_SUFFIX}`;
		removeAt(at, dir, tmp);
		at.symlink(want, dir, tmp);
		at.rename(dir, tmp, dir, name);
	}
}

function isUnwanted(ctx: SyncContext, name: string, version: string): boolean {
	if (name === DATA_LINK || name === version) return false;
	if (name.startsWith("..")) return true;
	return !Object.hasOwn(ctx.files, name);
}

/** Leftovers of a killed run inside the open target: `..data_tmp`, link temps, versions `..data` doesn't name. */
export function removeStaleInside(at: AtCalls, target: { fd: number; path: string }) {
	const live = readlinkAt(at, target.fd, DATA_LINK);
	const stale = new Set<string>();
	for (const name of listAt(target.fd)) {
		if (name === DATA_LINK || name === live) continue;
		if (name.startsWith("..") || name.endsWith(LINK_TMP_SUFFIX)) stale.add(name);
	}
	if (stale.size === 0) return [];
	return removeStale(at, target, (n) => stale.has(n), target.path);
}

/** Whether the open directory `parent` holds `name` in the symlink layout (a `..data` link inside). */
export function isSymlinkLayoutAt(at: AtCalls, parent: number, name: string): boolean {
	const st = lstatAt(at, parent, name);
	if (st === undefined || !st.isDirectory()) return false;
	return withFd(
		at.open(parent, name, DIRECTORY_FLAGS),
		(fd) => lstatAt(at, fd, DATA_LINK)?.isSymbolicLink() ?? false,
	);
}

/** Read-only, by path (plan): whether `target` holds a `..data` link. */
export function isSymlinkLayout(target: string): boolean {
	try {
		return lstatSync(join(target, DATA_LINK)).isSymbolicLink();
	} catch {
		return false;
	}
}
