/**
 * A certificate written where its layout keeps it (targets/haproxy/engine/placement.ts plans the files): one file replaced
 * atomically, or a pair (certificate file and key file) made live together.
 *
 * A pair cannot be replaced by one rename. Every file is first written under a dot-named temp name in its own
 * directory (HAProxy's directory loading skips it; a rename within one directory is atomic, and a key file may
 * live apart from its certificate, under a store's key-base) and fsynced, with each directory; then a journal naming every rename, in order, is made durable in
 * crt_dir (`.certificatee-pair-<hex>.json`, dot-named too) before the first rename; then the renames; then
 * the journal goes. A writer killed at any point leaves either the old files and some temp files (swept as
 * leftovers), or a journal that finishPairWrites() rolls forward at the next observation, before anything else
 * is read. Where the key is a companion (X.key, loaded only when X holds no key) the renames are ordered so
 * every intermediate state loads: X with the key inside, the new X.key, X without the key. Where a `key`
 * argument overrides the key in X, no order avoids one mismatched state between the two renames: the journal
 * keeps it to the moment between them.
 */
import { randomBytes } from "node:crypto";
import { readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { syncDir, writeFileAtomic, writeTempFile } from "../../base/atomic-file.js";
import { type Bundle, combinedPem } from "../../certificates/index.js";
import { CertificateeError } from "../../errors.js";
import type { PlacedWrite } from "../haproxy/engine/model.js";
import { keyMatchesPem } from "./keys.js";

const JOURNAL = /^\.certificatee-pair-[0-9a-f]{12}\.json$/;

interface Journal {
	renames: Array<{ from: string; to: string }>;
}

function contentOf(part: PlacedWrite["files"][number]["part"], bundle: Bundle): string {
	switch (part) {
		case "combined":
			return combinedPem(bundle);
		case "certificates":
			return bundle.fullchainPem;
		case "key":
			return bundle.key.reveal();
	}
}

/** The mode a replaced file keeps (an operator's 0640 for HAProxy's group stays); 0600 for a new one. */
async function modeOf(path: string): Promise<number> {
	const s = await stat(path).catch(() => undefined);
	return s === undefined ? 0o600 : s.mode & 0o777;
}

/**
 * The files to write: when the key file already holds the bundle's key (a renewal that kept its key), only
 * the certificate file changes, by one atomic rename.
 */
async function filesToWrite(write: PlacedWrite, bundle: Bundle): Promise<PlacedWrite["files"]> {
	const keyFile = write.files.find((f) => f.part === "key");
	if (keyFile === undefined) return write.files;
	const current = await readFile(keyFile.path, "utf8").catch(() => undefined);
	if (current === undefined || !keyMatchesPem(bundle.certPem, current)) return write.files;
	const last = write.files.at(-1);
	return last === undefined ? [] : [last];
}

async function removeAll(paths: readonly string[]): Promise<void> {
	const dirs = new Set<string>();
	for (const path of paths) {
		try {
			await unlink(path);
			dirs.add(dirname(path));
		} catch (e) {
			if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
		}
	}
	for (const dir of dirs) await syncDir(dir);
}

/** Performs a placed write (see the file comment); `journalDir` is crt_dir. Throws a CertificateeError. */
export async function writePlaced(write: PlacedWrite, bundle: Bundle, journalDir: string): Promise<void> {
	const files = await filesToWrite(write, bundle);
	const releases: Array<() => void> = [];
	try {
		await removeAll(write.removeFirst);
		if (files.length === 1) {
			const [only] = files as [PlacedWrite["files"][number]];
			await writeFileAtomic(only.path, contentOf(only.part, bundle), { mode: await modeOf(only.path) });
		} else if (files.length > 1) {
			const journal: Journal = { renames: [] };
			for (const f of files) {
				const temp = await writeTempFile(f.path, contentOf(f.part, bundle), { mode: await modeOf(f.path) });
				releases.push(temp.release);
				journal.renames.push({ from: temp.temp, to: f.path });
			}
			// The temp files' names durable in their own directories (a key-base apart from the crt-base is a
			// second one) before the journal that names them: a rename it replays never misses one of the pair.
			for (const d of new Set(journal.renames.map((r) => dirname(r.from)))) await syncDir(d);
			const journalPath = join(journalDir, `.certificatee-pair-${randomBytes(6).toString("hex")}.json`);
			await writeFileAtomic(journalPath, `${JSON.stringify(journal)}\n`);
			await finishJournal(journalPath, journal);
		}
		await removeAll(write.removeAfter);
	} catch (cause) {
		throw new CertificateeError(
			"ENDPOINT_ERROR",
			`cannot write ${files.map((f) => f.path).join(" and ")}: ${(cause as Error).message}`,
			{
				context: { file: files[0]?.path ?? journalDir, operation: "storage-replace" },
				cause,
				retryable: true,
				hint: "a half-done pair is finished at the next observation; check the directory's permissions",
			},
		);
	} finally {
		for (const release of releases) release();
	}
}

/** The renames of a journal that are still to do (idempotent), then the journal removed. */
async function finishJournal(path: string, journal: Journal): Promise<void> {
	const dirs = new Set<string>();
	for (const { from, to } of journal.renames) {
		try {
			await rename(from, to);
			dirs.add(dirname(to));
		} catch (e) {
			if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
		}
	}
	for (const dir of dirs) await syncDir(dir);
	try {
		await unlink(path);
	} catch (e) {
		// Another process finished the same journal.
		if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
	}
	await syncDir(dirname(path));
}

/**
 * Rolls forward every pair write a killed writer left half done in `dir` (crt_dir), before anything is read.
 * Returns the journals finished (or, with dryRun, the ones that would be).
 */
export async function finishPairWrites(dir: string, options: { dryRun?: boolean } = {}): Promise<string[]> {
	const names = await readdir(dir).catch((e: NodeJS.ErrnoException) => {
		if (e.code === "ENOENT") return [] as string[];
		throw e;
	});
	const finished: string[] = [];
	for (const name of names.filter((n) => JOURNAL.test(n))) {
		const path = join(dir, name);
		if (options.dryRun) {
			finished.push(path);
			continue;
		}
		const journal = JSON.parse(await readFile(path, "utf8")) as Journal;
		await finishJournal(path, journal);
		finished.push(path);
	}
	return finished;
}
