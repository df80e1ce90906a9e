/**
 * The storage side of a haproxy-runtime target: one combined PEM per certificate in crt_dir.
 * Writes are atomic (base/atomic-file.ts: a dot-named temp file, which HAProxy's directory loading skips; fsync;
 * rename; fsync of the directory, once for a batch of files) and private (0600).
 */
import { createHash, X509Certificate } from "node:crypto";
import { statSync } from "node:fs";
import { readdir, readFile, unlink } from "node:fs/promises";
import { basename, join } from "node:path";
import pLimit from "p-limit";
import { sweepTempFiles, syncDir, writeFileAtomicUnsynced } from "../../base/atomic-file.js";
import { createInterner } from "../../base/intern.js";
import { commonName } from "../../certificates/index.js";
import { CertificateeError } from "../../errors.js";
import { leafMeta } from "../../reconcile/leaf-meta.js";
import type { RefMeta } from "../../reconcile/model.js";

// HAProxy's `crt <dir>` skips these companions; so do we.
const COMPANION = /\.(key|ocsp|issuer|sctl)$/;

/** Parsed files by ref, reused while a file's inode, size and times are unchanged; keyInside: the PEM holds a key. */
export type CrtDirCache = Map<string, { stamp: string; meta: RefMeta; keyInside?: boolean }>;

/**
 * Files parsed by content, for every endpoint of the process: the nodes of a fleet hold the same certificates,
 * so one parse (and one RefMeta, never changed once made) serves all of them. Keyed by the content's SHA-256,
 * so no key material is kept as a key.
 */
const parsed = createInterner<{ meta: RefMeta; keyInside: boolean }>(20_000);

function parseFile(pem: string): { meta: RefMeta; keyInside: boolean } {
	const digest = createHash("sha256").update(pem).digest("base64");
	return parsed.get(digest, () => ({ meta: leafMeta(pem), keyInside: holdsKey(pem) }));
}

/** What a crt_dir listing says of its layout: every name in it, and the certificate files that hold no key. */
export interface CrtDirLayout {
	names: Set<string>;
	keyless: Set<string>;
}

/** Does a PEM hold a private key block? */
export function holdsKey(pem: string): boolean {
	return /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem);
}

/**
 * Every certificate file in crt_dir (file name = ref) with what its leaf says; unreadable files have an
 * empty meta. With a cache, unchanged files cost one stat instead of a read and an X.509 parse; `changed`
 * receives the refs whose file is new, different or gone since the cache saw them.
 */
export async function readCrtDir(
	dir: string,
	cache: CrtDirCache = new Map(),
	changed?: Set<string>,
	layout?: CrtDirLayout,
): Promise<Map<string, RefMeta>> {
	const entries = await readdir(dir, { withFileTypes: true });
	const refs = new Map<string, RefMeta>();
	const toRead: Array<{ ref: string; stamp: string }> = [];
	for (const e of entries) {
		layout?.names.add(e.name);
		if (!e.isFile() || e.name.startsWith(".") || COMPANION.test(e.name)) continue;
		// Synchronous: thousands of stats take a few milliseconds this way, and far longer as promises.
		const s = statSync(join(dir, e.name), { throwIfNoEntry: false });
		if (s === undefined) continue; // removed since the listing
		const stamp = stampOf(s);
		const cached = cache.get(e.name);
		if (cached?.stamp === stamp) {
			refs.set(e.name, cached.meta);
			if (cached.keyInside === false) layout?.keyless.add(e.name);
		} else toRead.push({ ref: e.name, stamp });
	}
	await Promise.all(
		toRead.map(async ({ ref, stamp }) => {
			const { meta, keyInside } = parseFile(await readFile(join(dir, ref), "utf8"));
			cache.set(ref, { stamp, meta, keyInside });
			refs.set(ref, meta);
			if (!keyInside) layout?.keyless.add(ref);
			changed?.add(ref);
		}),
	);
	for (const ref of cache.keys()) {
		if (refs.has(ref)) continue;
		cache.delete(ref);
		changed?.add(ref);
	}
	return refs;
}

/** The intermediates of a combined PEM as HAProxy lists them (subject and issuer CNs), leaf excluded. */
export function chainNames(pem: string): Array<{ subject: string; issuer: string }> {
	const blocks = pem.match(/-----BEGIN CERTIFICATE-----\r?\n[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
	return blocks.slice(1).map((b) => {
		const x = new X509Certificate(b);
		return { subject: commonName(x.subject), issuer: commonName(x.issuer) };
	});
}

/** A file's identity for the cache: inode, size and times. */
function stampOf(s: { ino: number; size: number; mtimeMs: number; ctimeMs: number }): string {
	return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
}

/** A ref is a plain file name inside crt_dir. */
export function refPath(dir: string, ref: string): string {
	if (ref === "" || ref !== basename(ref) || ref.startsWith(".") || ref.includes("\0")) {
		throw new CertificateeError("RUNTIME_COMMAND_FAILED", `"${ref}" is not a file name inside ${dir}`, {
			context: { file: dir, ref, operation: "storage" },
			hint: "refs of a haproxy-runtime target are plain file names (no slash, not starting with a dot)",
		});
	}
	return join(dir, ref);
}

/** temp + fsync + rename + fsync(dir), mode 0600. */
export async function writeAtomic(dir: string, ref: string, content: string): Promise<void> {
	const [error] = await writeAtomicMany(dir, [{ ref, content }]);
	if (error) throw error;
}

// Files written and fsynced at once by writeAtomicMany: enough to overlap the fsyncs, few descriptors.
const WRITE_CONCURRENCY = 32;

/**
 * Several refs written as writeAtomic() writes one, together: every temp file written and fsynced (up to
 * WRITE_CONCURRENCY at once) and renamed, then one fsync of the directory for all. When it returns, every file
 * reported written is durable. Returns one error (or undefined) per item, in order.
 */
export async function writeAtomicMany(
	dir: string,
	items: ReadonlyArray<{ ref: string; content: string; meta?: RefMeta }>,
	cache?: CrtDirCache,
): Promise<Array<CertificateeError | undefined>> {
	const errors: Array<CertificateeError | undefined> = new Array(items.length).fill(undefined);
	const inodes: Array<number | undefined> = new Array(items.length).fill(undefined);
	const limit = pLimit(WRITE_CONCURRENCY);
	await Promise.all(
		items.map(({ ref, content }, i) =>
			limit(async () => {
				let path: string;
				try {
					path = refPath(dir, ref);
				} catch (e) {
					errors[i] = e as CertificateeError;
					return;
				}
				try {
					inodes[i] = await writeFileAtomicUnsynced(path, content);
				} catch (cause) {
					errors[i] = storageError(dir, ref, "write", cause);
				}
			}),
		),
	);
	if (errors.every((e) => e !== undefined)) return errors;
	try {
		await syncDir(dir);
	} catch (cause) {
		// Renamed but not known to be durable: reported failed (the next cycle writes them again).
		return items.map(({ ref }, i) => errors[i] ?? storageError(dir, ref, "write", cause));
	}
	// What a written file says is known: the cache takes it while the file is still the one written (its inode).
	for (const [i, { ref, meta }] of items.entries()) {
		if (cache === undefined || meta === undefined || errors[i] !== undefined) continue;
		const s = statSync(join(dir, ref), { throwIfNoEntry: false });
		if (s !== undefined && s.ino === inodes[i]) cache.set(ref, { stamp: stampOf(s), meta });
	}
	return errors;
}

/**
 * Removes the temp files a killed writer left in `dir` (base/atomic-file.ts names them): only those last
 * modified `minAgeMs` (default 2 s) or more before `now` (another certificatee process mid-write). Returns the
 * paths removed, or with `dryRun` the paths it would remove.
 */
export function removeLeftovers(
	dir: string,
	now: Date,
	options: { minAgeMs?: number; dryRun?: boolean } = {},
): Promise<string[]> {
	return sweepTempFiles(dir, { now, minAgeMs: options.minAgeMs ?? 2_000, dryRun: options.dryRun ?? false });
}

/** Removes a ref's file; false when it was already gone. */
export async function removeFile(dir: string, ref: string): Promise<boolean> {
	try {
		await unlink(refPath(dir, ref));
	} catch (cause) {
		if ((cause as NodeJS.ErrnoException).code === "ENOENT") return false;
		throw storageError(dir, ref, "delete", cause);
	}
	await syncDir(dir);
	return true;
}

function storageError(dir: string, ref: string, operation: string, cause: unknown): CertificateeError {
	return new CertificateeError(
		"ENDPOINT_ERROR",
		`cannot ${operation} ${join(dir, ref)}: ${(cause as Error).message}`,
		{ context: { file: join(dir, ref), ref, operation: `storage-${operation}` }, cause, retryable: true },
	);
}
