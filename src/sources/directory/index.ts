/**
 * `type: directory`: serves the valid certificates found in a directory of PEM files (see files.ts for the
 * layout). Each file is parsed and checked with the certificate model; an invalid one is reported with its
 * reason and skipped while the others are served. watch() lets the daemon react to changes promptly.
 */
import { type FSWatcher, watch as fsWatch } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import pLimit from "p-limit";
import { type Bundle, checkBundle } from "../../certificates/index.js";
import { CertificateeError, describeError } from "../../errors.js";
import type { DesiredCertificate, SourceProblem } from "../../reconcile/model.js";
import type { Source } from "../types.js";
import { type Candidate, candidateFiles, groupFiles } from "./files.js";
import { createParsedCache, type ParsedCache, sourceFileOf } from "./parsed-cache.js";
import { type DirectorySourceConfig, directorySourceSchema } from "./schema.js";
import { type LoadedFile, selectNewest } from "./select.js";

export { type DirectorySourceConfig, directorySourceSchema };

export interface DirectorySourceDeps {
	clock?: () => Date;
	/** How recent a file change must be to be parsed again on the next load too (see parsed-cache.ts). */
	racyMs?: number;
}

/** A directory source always watches: onChange runs once the directory has been quiet for `debounce`. */
export type WatchableSource = Source & Required<Pick<Source, "watch">>;

/** Files read and parsed at once when many changed (reading is I/O; parsing is synchronous CPU). */
const READ_CONCURRENCY = 32;

type Loaded = { ok: true; bundle: Bundle } | { ok: false; problems: CertificateeError[] };

/** The candidate's bundle, parsed again only when a file changed, checked against `now` every time. */
async function loadCandidate(cache: ParsedCache, dir: string, c: Candidate, now: Date): Promise<Loaded> {
	const found = cache.lookup(dir, c);
	const parsed = "hit" in found ? found.hit : await cache.parse(dir, c, found.miss);
	if (!parsed.ok) return { ok: false, problems: [parsed.error] };
	const problems = checkBundle(parsed.bundle, { source: sourceFileOf(dir, c), now });
	return problems.length === 0 ? { ok: true, bundle: parsed.bundle } : { ok: false, problems };
}

export function createDirectorySource(
	config: DirectorySourceConfig,
	deps: DirectorySourceDeps = {},
): WatchableSource {
	const clock = deps.clock ?? (() => new Date());
	let previous = new Map<string, DesiredCertificate>();
	const reader: CandidateReader = {
		cache: createParsedCache(deps.racyMs === undefined ? {} : { racyMs: deps.racyMs }),
		limit: pLimit(READ_CONCURRENCY),
	};

	async function load(signal: AbortSignal) {
		const now = clock();
		const files = await listFiles(config);
		// Keep serving what was valid before rather than dropping every certificate.
		if (!Array.isArray(files)) return { certificates: [...previous.values()], problems: [files] };
		const grouped = groupFiles(files);
		const problems: SourceProblem[] = grouped.problems.map((p) => ({
			subject: join(config.path, p.file),
			error: new CertificateeError(p.code, `${join(config.path, p.file)}: ${p.message}`, {
				context: { file: join(config.path, p.file) },
			}),
		}));
		const { loaded, invalid } = await loadCandidates(
			reader,
			config.path,
			grouped.candidates,
			now,
			problems,
			signal,
		);
		signal.throwIfAborted();
		const { served, skipped } = selectNewest({
			loaded,
			previous,
			invalid,
			now,
			origin: (s) => `source ${config.name}: ${s}`,
		});
		for (const s of skipped) {
			problems.push({
				subject: s.subject,
				error: new CertificateeError("SOURCE_OLDER", s.message, { context: { file: s.subject } }),
			});
		}
		previous = new Map(served.map((d) => [d.name, d]));
		return { certificates: served, problems };
	}

	return { name: config.name, load, watch: (onChange) => watchDirectory(config, onChange) };
}

/** The names of the files in the directory, or the problem that it cannot be read. */
async function listFiles(config: DirectorySourceConfig): Promise<string[] | SourceProblem> {
	try {
		return (await readdir(config.path, { withFileTypes: true }))
			.filter((e) => !e.isDirectory())
			.map((e) => e.name);
	} catch (e) {
		const error = new CertificateeError(
			"SOURCE_UNREADABLE",
			`source "${config.name}": cannot read directory ${config.path}: ${describeError(e)}`,
			{ context: { file: config.path }, hint: "check the path and its permissions", retryable: true },
		);
		return { subject: config.path, error };
	}
}

/** The parsed-file cache and the read concurrency of one source. */
interface CandidateReader {
	cache: ParsedCache;
	limit: ReturnType<typeof pLimit>;
}

/**
 * Loads every candidate (READ_CONCURRENCY at a time); an invalid or unreadable one is a problem, added to
 * `problems` in the candidates' order.
 */
async function loadCandidates(
	{ cache, limit }: CandidateReader,
	dir: string,
	candidates: readonly Candidate[],
	now: Date,
	problems: SourceProblem[],
	signal: AbortSignal,
): Promise<{ loaded: LoadedFile[]; invalid: Set<string> }> {
	const loaded: LoadedFile[] = [];
	const invalid = new Set<string>();
	cache.retain(new Set(candidates.map((c) => c.name)));
	const results = await Promise.all(
		candidates.map((c) =>
			limit(async () => {
				signal.throwIfAborted();
				try {
					return await loadCandidate(cache, dir, c, now);
				} catch (e) {
					return { ok: false as const, unreadable: e };
				}
			}),
		),
	);
	for (const [i, c] of candidates.entries()) {
		const result = results[i] as Loaded | { ok: false; unreadable: unknown };
		const subject = candidateFiles(c)
			.map((f) => join(dir, f))
			.join(" + ");
		if (result.ok) loaded.push({ name: c.name, subject, bundle: result.bundle });
		else if ("unreadable" in result) {
			invalid.add(c.name);
			problems.push({
				subject,
				error: new CertificateeError("SOURCE_UNREADABLE", `${subject}: ${describeError(result.unreadable)}`, {
					context: { file: subject },
					retryable: true,
				}),
			});
		} else {
			invalid.add(c.name);
			for (const error of result.problems) problems.push({ subject, error });
		}
	}
	return { loaded, invalid };
}

/** Calls onChange once the directory has been quiet for `debounce`; returns the stop function. */
function watchDirectory(config: DirectorySourceConfig, onChange: () => void): () => void {
	let timer: NodeJS.Timeout | undefined;
	let watcher: FSWatcher | undefined;
	const fire = () => {
		clearTimeout(timer);
		timer = setTimeout(onChange, config.debounce);
	};
	try {
		watcher = fsWatch(config.path, { persistent: false }, fire);
		// The directory may disappear; the next load reports it.
		watcher.on("error", fire);
	} catch {
		// Not watchable now (missing): periodic loads still pick it up.
	}
	return () => {
		clearTimeout(timer);
		watcher?.close();
	};
}
