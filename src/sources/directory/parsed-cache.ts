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
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { type Bundle, parseBundle } from "../../certificates/index.js";
import type { CertificateeError } from "../../errors.js";
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
 * parses a candidate's files. A read error is thrown; a parse error is the result.
 */
export function readAndParse(dir: string, c: Candidate): Parsed {
	const read = (f: string) => readFileSync(join(dir, f));
	const source = sourceFileOf(dir, c);
	const input =
		c.kind === "combined"
			? { combined: read(c.file) }
			: { cert: read(c.cert), key: read(c.key), ...(c.chain ? { chain: read(c.chain) } : {}) };
	try {
		return { ok: true, bundle: parseBundle(input, { source }) };
	} catch (e) {
		return { ok: false, error: e as CertificateeError };
	}
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
