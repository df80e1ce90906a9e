/**
 * Whole-file writes that a crash (kill -9, power loss) never leaves half done, and the sweep of what a killed
 * writer leaves: the one primitive of the state store, the HAProxy storage writes and the pair writer.
 *
 * A write goes to `.<name>.certificatee-<12 hex>.tmp` beside the file (dot-named: HAProxy's directory loading
 * skips it), is fsynced, renamed over the file, and the directory is fsynced. Readers see the old file or the
 * new one; a kill leaves at most a temp file, which sweepTempFiles() removes. atomicdir (the directory target)
 * writes through a directory descriptor instead (never through a symlink) but names and sweeps its temp files
 * with tempName() and isTempOf() from here.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** Temp files this process is writing right now (absolute paths): a sweep never takes them for leftovers. */
export const writing = new Set<string>();

const TEMP = /^\.(.+)\.certificatee-[0-9a-f]{12}\.tmp$/;
/** Names older versions used, still swept: the pair writer's, the state store's, atomicdir's file writes. */
const OLDER = [
	/^\.(.+)\.certificatee-pair-[0-9a-f]{12}\.tmp$/,
	/^\.tmp-(.+)\.\d+\.[0-9a-f]{8}$/,
	/^\.(.+)\.atomicdir-tmp-\d+-[0-9a-z]+$/,
];

/** The temp name of a write of the file named `name`. */
export function tempName(name: string): string {
	return `.${name}.certificatee-${randomBytes(6).toString("hex")}.tmp`;
}

/** The file a temp name belongs to, when it is one of certificatee's (this version's or an older one's). */
export function tempOwner(name: string): string | undefined {
	for (const pattern of [TEMP, ...OLDER]) {
		const owner = pattern.exec(name)?.[1];
		if (owner !== undefined) return owner;
	}
	return undefined;
}

export const isTempName = (name: string): boolean => tempOwner(name) !== undefined;

/** Is `name` a temp file of a write of the file named `file`? */
export const isTempOf = (name: string, file: string): boolean => tempOwner(name) === file;

export interface AtomicWriteOptions {
	/** The file's mode, set exactly (the umask does not narrow it); 0600 unless said. */
	mode?: number;
	/** Another owner than the process's (a root-owned list is kept root-owned, or the write fails). */
	owner?: { uid: number; gid: number };
	/** Create the directory (0700) when missing. */
	mkdir?: boolean;
}

/**
 * Writes `data` under a temp name beside `path` and fsyncs it; the caller renames it (the pair writer renames
 * several together). Registered in `writing` until release() is called; removed again on failure.
 */
export async function writeTempFile(
	path: string,
	data: string | Uint8Array,
	options: AtomicWriteOptions = {},
): Promise<{ temp: string; ino: number; release: () => void }> {
	const mode = options.mode ?? 0o600;
	const dir = dirname(path);
	if (options.mkdir) await mkdir(dir, { recursive: true, mode: 0o700 });
	const temp = join(dir, tempName(basename(path)));
	writing.add(temp);
	const release = () => writing.delete(temp);
	try {
		const handle = await open(temp, "wx", mode);
		try {
			const { owner } = options;
			if (owner && (owner.uid !== process.getuid?.() || owner.gid !== process.getgid?.())) {
				await handle.chown(owner.uid, owner.gid);
			}
			await handle.writeFile(data);
			await handle.chmod(mode);
			await handle.sync();
			return { temp, ino: (await handle.stat()).ino, release };
		} finally {
			await handle.close();
		}
	} catch (e) {
		await unlink(temp).catch(() => undefined);
		release();
		throw e;
	}
}

/** writeFileAtomic() without the fsync of the directory (the caller fsyncs it, once for several files). */
export async function writeFileAtomicUnsynced(
	path: string,
	data: string | Uint8Array,
	options: AtomicWriteOptions = {},
): Promise<number> {
	const { temp, ino, release } = await writeTempFile(path, data, options);
	try {
		await rename(temp, path);
	} catch (e) {
		await unlink(temp).catch(() => undefined);
		throw e;
	} finally {
		release();
	}
	return ino;
}

/** Replaces `path` atomically (temp, fsync, rename, fsync of the directory); returns the new file's inode. */
export async function writeFileAtomic(
	path: string,
	data: string | Uint8Array,
	options: AtomicWriteOptions = {},
): Promise<number> {
	const ino = await writeFileAtomicUnsynced(path, data, options);
	await syncDir(dirname(path));
	return ino;
}

/** fsync of a directory, so the names it holds (a rename, a removal) survive a power loss. */
export async function syncDir(dir: string): Promise<void> {
	const handle = await open(dir, "r");
	try {
		await handle.sync();
	} finally {
		await handle.close();
	}
}

export interface SweepOptions {
	/** Leave temp files modified less than this before `now` (another process mid-write); 0: remove all. */
	minAgeMs?: number;
	now?: Date;
	/** Into subdirectories too (the state store). */
	recursive?: boolean;
	/** Only say which would be removed. */
	dryRun?: boolean;
}

/**
 * Removes certificatee's temp files (this version's names and older ones') a killed writer left in `dir`:
 * never one this process is writing, nor one younger than `minAgeMs`. Returns the paths removed (or, with
 * `dryRun`, those it would remove); a directory that does not exist holds none.
 */
export async function sweepTempFiles(dir: string, options: SweepOptions = {}): Promise<string[]> {
	const { minAgeMs = 0, now = new Date() } = options;
	const entries = await readdir(dir, { withFileTypes: true }).catch((e: NodeJS.ErrnoException) => {
		if (e.code === "ENOENT" || e.code === "ENOTDIR") return [];
		throw e;
	});
	const removed: string[] = [];
	for (const entry of entries) {
		const path = join(dir, entry.name);
		if (entry.isDirectory() && options.recursive) removed.push(...(await sweepTempFiles(path, options)));
		if (!entry.isFile() || !isTempName(entry.name) || writing.has(path)) continue;
		const s = minAgeMs > 0 ? await stat(path).catch(() => undefined) : undefined;
		if (minAgeMs > 0 && (s === undefined || now.getTime() - s.mtimeMs < minAgeMs)) continue;
		if (options.dryRun || (await unlink(path).then(gone, ifGone))) removed.push(path);
	}
	if (removed.some((p) => dirname(p) === dir) && !options.dryRun) await syncDir(dir);
	return removed;
}

const gone = () => true;
const ifGone = (e: NodeJS.ErrnoException): boolean => {
	if (e.code === "ENOENT") return false;
	throw e;
};
