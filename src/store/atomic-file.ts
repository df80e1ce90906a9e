/** Whole-file writes that a crash (kill -9, power loss) can never leave half done. */
import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

const TEMP_MARK = ".tmp-";

/**
 * Writes `data` to a temporary file beside `path` (mode 0600 by default), fsyncs it, renames it over `path`
 * and fsyncs the directory. Readers see the old file or the new one; a crash leaves at most a temporary file,
 * which removeTempFiles() deletes.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
	const dir = dirname(path);
	await mkdir(dir, { recursive: true, mode: 0o700 });
	const temp = join(dir, `${TEMP_MARK}${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}`);
	const handle = await open(temp, "wx", mode);
	try {
		await handle.writeFile(data);
		await handle.chmod(mode); // the umask may have narrowed or widened nothing, but be exact
		await handle.sync();
	} catch (e) {
		await handle.close();
		await rm(temp, { force: true });
		throw e;
	}
	await handle.close();
	try {
		await rename(temp, path);
	} catch (e) {
		await rm(temp, { force: true });
		throw e;
	}
	await syncDir(dir);
}

export async function syncDir(dir: string): Promise<void> {
	const handle = await open(dir, "r");
	try {
		await handle.sync();
	} finally {
		await handle.close();
	}
}

export function isTempFile(name: string): boolean {
	return name.startsWith(TEMP_MARK);
}

/** Deletes temporary files a crashed writer left under `dir` (recursively). Only call while holding the lock. */
export async function removeTempFiles(dir: string): Promise<number> {
	let removed = 0;
	let entries: import("node:fs").Dirent[];
	try {
		entries = await readdir(dir, { withFileTypes: true });
	} catch {
		return 0;
	}
	for (const entry of entries) {
		const full = join(dir, entry.name);
		if (entry.isDirectory()) removed += await removeTempFiles(full);
		else if (isTempFile(entry.name)) {
			await rm(full, { force: true });
			removed += 1;
		}
	}
	return removed;
}
