/**
 * Parsing a certificate file is the expensive part of loading a directory (key decoding alone is about a
 * millisecond per file), so a file is read and parsed again only when its identity changed: device, inode,
 * size, mtime and ctime in nanoseconds, for every file of the candidate. A rename onto the name (how renewed
 * files arrive) changes the inode; an in-place rewrite changes mtime and ctime.
 *
 * One case the identity cannot see: a rewrite of the same size within the file system's timestamp
 * granularity of the previous one. A file whose mtime is this recent ("racy", as git calls it) is parsed
 * but not trusted: the next load parses it again, until it has been quiet for `racyMs`.
 *
 * What is cached is the parse (the bundle, or the parse error, both a function of the bytes only); the checks
 * that depend on time (expiry, not-yet-valid) run on every load. A read error is never cached.
 */
import { closeSync, constants, fstatSync, openSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { MAX_BUNDLE_BYTES } from "../../certificates/bundle.js";
import { type Bundle, parseBundle } from "../../certificates/index.js";
import { CertificateeError, isCertificateeError } from "../../errors.js";
import { type Candidate, candidateFiles } from "./files.js";

export type Parsed = { ok: true; bundle: Bundle } | { ok: false; error: CertificateeError };

interface Entry {
	identity: string;
	parsed: Parsed;
	/** Parsed while a file was still within the racy window: parse again next time. */
	trusted: boolean;
}

/** The files' identity as lookup() saw it; `racy` when one changed too recently to be trusted. */
export interface Identity {
	key: string;
	racy: boolean;
}

export interface ParsedCache {
	/** The cached parse when no file of the candidate changed, else the identity seen. Stats the files (synchronously). */
	lookup(dir: string, c: Candidate): { hit: Parsed } | { miss: Identity };
	/** Reads and parses the candidate's files, and remembers the result under the identity lookup returned. */
	parse(dir: string, c: Candidate, seen: Identity): Parsed;
	/** Remembers a parse made elsewhere (readAndParse in a worker) under the identity lookup returned. */
	remember(dir: string, c: Candidate, seen: Identity, parsed: Parsed): Parsed;
	/** Forgets every candidate not in `names` (files that went away). */
	retain(names: ReadonlySet<string>): void;
	readonly size: number;
	/** Candidates parsed while racy: the next load parses them again. */
	readonly untrusted: number;
}

/** Two seconds covers every common file system's mtime granularity (ext4/xfs: ns; FAT: 2 s). */
export const DEFAULT_RACY_MS = 2_000;

/** File times are wall-clock times, so the racy window is measured against the wall clock, not an injected one. */
function identityOf(dir: string, c: Candidate, racyMs: number): Identity {
	const now = Date.now();
	let racy = false;
	const parts: string[] = [];
	for (const f of candidateFiles(c)) {
		const s = statSync(join(dir, f), { bigint: true });
		parts.push(`${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`);
		const changedMs = Math.max(Number(s.mtimeNs / 1_000_000n), Number(s.ctimeNs / 1_000_000n));
		if (now - changedMs < racyMs) racy = true;
	}
	return { key: `${c.kind}|${parts.join("|")}`, racy };
}

/** The file a candidate's problems are reported against: the combined file, or the certificate of a split one. */
export function sourceFileOf(dir: string, c: Candidate): string {
	return join(dir, c.kind === "combined" ? c.file : c.cert);
}

/**
 * Reads (synchronously: a few kilobytes from the page cache cost less than an asynchronous round trip) and
 * parses a candidate's files. A read error is thrown; a parse error, and a file that is no regular file or too
 * large to be a bundle, is the result.
 */
export function readAndParse(dir: string, c: Candidate): Parsed {
	const source = sourceFileOf(dir, c);
	try {
		const read = (f: string) => readSourceFile(join(dir, f));
		const input =
			c.kind === "combined"
				? { combined: read(c.file) }
				: { cert: read(c.cert), key: read(c.key), ...(c.chain ? { chain: read(c.chain) } : {}) };
		return { ok: true, bundle: parseBundle(input, { source }) };
	} catch (e) {
		if (isCertificateeError(e)) return { ok: false, error: e };
		throw e;
	}
}

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;

/**
 * One source file, read as a bundle may be: never through a symlink (a link planted in a source directory
 * would make certificatee serve a key it can read and the link's author cannot), never a FIFO, socket or
 * device (opened non-blocking, checked with fstat: a FIFO blocked the daemon's event loop), and never more
 * than MAX_BUNDLE_BYTES + 1 bytes (a huge file or a device was read whole before the size check).
 */
export function readSourceFile(path: string): Buffer {
	let fd: number;
	try {
		fd = openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code !== "ELOOP") throw e;
		throw new CertificateeError(
			"SOURCE_UNREADABLE",
			`${path} is a symlink; certificatee does not follow links in a source directory`,
			{
				context: { file: path },
				hint: "put the file itself in the directory (copy or rename it there), or point the source at the directory that holds it",
			},
		);
	}
	try {
		const st = fstatSync(fd);
		if (!st.isFile()) {
			throw new CertificateeError(
				"SOURCE_UNREADABLE",
				`${path} is not a regular file (a FIFO, socket or device); not read`,
				{
					context: { file: path },
					hint: "remove it: a source directory holds certificate files only",
				},
			);
		}
		const limit = MAX_BUNDLE_BYTES + 1;
		if (st.size >= limit) return tooLarge(path, `${st.size}`);
		// Read on to EOF (the file may have grown since fstat), never past the limit.
		const chunks: Buffer[] = [];
		let total = 0;
		for (;;) {
			const chunk = Buffer.alloc(Math.min(64 * 1024, limit - total));
			const n = readSync(fd, chunk, 0, chunk.length, null);
			if (n === 0) return Buffer.concat(chunks, total);
			chunks.push(chunk.subarray(0, n));
			total += n;
			if (total >= limit) return tooLarge(path, `more than ${MAX_BUNDLE_BYTES}`);
		}
	} finally {
		closeSync(fd);
	}
}

function tooLarge(path: string, size: string): never {
	throw new CertificateeError(
		"BUNDLE_TOO_LARGE",
		`${path}: ${size} bytes; the limit is ${MAX_BUNDLE_BYTES} bytes; not read`,
		{
			context: { file: path },
			hint: "a certificate bundle is a few kilobytes: check what was put in the source directory",
		},
	);
}

export function createParsedCache(options: { racyMs?: number } = {}): ParsedCache {
	const racyMs = options.racyMs ?? DEFAULT_RACY_MS;
	const entries = new Map<string, Entry>();
	return {
		lookup(dir, c) {
			const seen = identityOf(dir, c, racyMs);
			const entry = entries.get(c.name);
			if (entry?.trusted && entry.identity === seen.key && !seen.racy) return { hit: entry.parsed };
			return { miss: seen };
		},
		parse(dir, c, seen) {
			// Read errors propagate and are not remembered.
			return this.remember(dir, c, seen, readAndParse(dir, c));
		},
		remember(dir, c, seen, parsed) {
			// The identity is taken again after the read so a file replaced while it was read is parsed again next time.
			const after = identityOf(dir, c, racyMs).key;
			entries.set(c.name, { identity: seen.key, parsed, trusted: !seen.racy && after === seen.key });
			return parsed;
		},
		retain(names) {
			for (const name of entries.keys()) if (!names.has(name)) entries.delete(name);
		},
		get size() {
			return entries.size;
		},
		get untrusted() {
			let n = 0;
			for (const e of entries.values()) if (!e.trusted) n++;
			return n;
		},
	};
}
