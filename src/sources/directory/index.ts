/**
 * `type: directory`: serves the valid certificates found in a directory of PEM files (see files.ts for the
 * layout). Each file is parsed and checked with the certificate model; an invalid one is reported with its
 * reason and skipped while the others are served. watch() lets the daemon react to changes promptly.
 */
import { type FSWatcher, watch as fsWatch } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { checkBundle, checkChangesAfter } from "../../certificates/index.js";
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import type { DesiredCertificate, SourceProblem } from "../../reconcile/model.js";
import type { Source, SourceResult } from "../types.js";
import { type Candidate, candidateFiles, groupFiles } from "./files.js";
import { type Previous, previousOf, type SourceMemory } from "./memory.js";
import { type ParseAllOptions, parseAll, type ReadOutcome } from "./parse-pool.js";
import {
	createParsedCache,
	DEFAULT_RACY_MS,
	type Identity,
	type ParsedCache,
	sourceFileOf,
} from "./parsed-cache.js";
import { type DirectorySourceConfig, directorySourceSchema } from "./schema.js";
import { type LoadedFile, selectNewest } from "./select.js";

export { type DirectorySourceConfig, directorySourceSchema };

export interface DirectorySourceDeps {
	clock?: () => Date;
	/** How recent a file change must be to be parsed again on the next load too (see parsed-cache.ts). */
	racyMs?: number;
	/** Worker threads for a load with many changed files (see parse-pool.ts); default: by core count. */
	workers?: number;
	/** Where the certificates served in place of their files are kept (memory.ts); without it, in this process only. */
	memory?: SourceMemory;
	/** Deliberate replacements (`certificatee replace`), read at each load: certificate name -> fingerprint. */
	replacements?: () => Promise<ReadonlyMap<string, string>>;
}

/** A directory source always watches: onChange runs once the directory has been quiet for `debounce`. */
export type WatchableSource = Source &
	Required<Pick<Source, "watch">> & {
		/** Files the next load must parse again: read within the racy window and not yet read again since. */
		readonly untrusted: number;
	};

/**
 * The last load's inputs and answer. When the next load finds the same file names, every parse the same object
 * (no file changed) and its clock before the first moment a certificate expires or becomes valid, its answer is
 * the same, so it is returned as is: an unchanged directory costs a readdir and a stat per file.
 */
type Grouped = ReturnType<typeof groupFiles>;

interface LastLoad {
	/** The listing's grouping: the same object while the directory holds the same names. */
	grouped: Grouped;
	parsed: readonly ReadOutcome[];
	from: number;
	until: number;
	/** The deliberate replacements it was decided with. */
	accepted: string;
	result: SourceResult;
}

export function createDirectorySource(
	config: DirectorySourceConfig,
	deps: DirectorySourceDeps = {},
): WatchableSource {
	const clock = deps.clock ?? (() => new Date());
	const cache = createParsedCache(deps.racyMs === undefined ? {} : { racyMs: deps.racyMs });
	// What the last load served (at first, what the state store remembers): saved to deps.memory when it changes.
	let previous = new Map<string, Previous>();
	let restored = false;
	let last: LastLoad | undefined;
	let listing: { files: readonly string[]; grouped: Grouped } | undefined;

	async function load(signal: AbortSignal): Promise<SourceResult> {
		if (!restored && deps.memory) previous = await deps.memory.load();
		restored = true;
		const now = clock();
		const files = await listFiles(config);
		// Keep serving what was valid before rather than dropping every certificate.
		if (!Array.isArray(files)) {
			const kept = [...previous.values()].flatMap((p) => p.certificate() ?? []);
			return { certificates: kept, problems: [files] };
		}
		// The same names as last time group the same way (groupFiles sorts them: 10 ms at 5,000 files).
		if (!listing || !sameNames(listing.files, files)) listing = { files, grouped: groupFiles(files) };
		const { grouped } = listing;
		const parsed = await readCandidates(cache, config.path, grouped.candidates, {
			signal,
			...(deps.workers === undefined ? {} : { workers: deps.workers }),
		});
		signal.throwIfAborted();
		// Unreadable replacements: none is honoured (never-downgrade stays), and the reason is reported.
		let accepted: ReadonlyMap<string, string> = new Map<string, string>();
		let replacementsProblem: SourceProblem | undefined;
		try {
			accepted = (await deps.replacements?.()) ?? accepted;
		} catch (e) {
			const error = isCertificateeError(e)
				? e
				: new CertificateeError("STATE_CORRUPT", `deliberate replacements unreadable: ${describeError(e)}`);
			replacementsProblem = { subject: `source ${config.name}: replacements`, error };
		}
		const acceptedKey = JSON.stringify([...accepted].sort());
		if (last && last.accepted === acceptedKey && unchanged(last, grouped, parsed, now.getTime()))
			return last.result;

		const problems: SourceProblem[] = grouped.problems.map((p) => ({
			subject: join(config.path, p.file),
			error: new CertificateeError(p.code, `${join(config.path, p.file)}: ${p.message}`, {
				context: { file: join(config.path, p.file) },
			}),
		}));
		if (replacementsProblem) problems.push(replacementsProblem);
		const { loaded, invalid } = checkCandidates(config.path, grouped.candidates, parsed, now, problems);
		const { served, skipped } = selectNewest({
			loaded,
			previous,
			invalid,
			now,
			origin: (s) => `source ${config.name}: ${s}`,
			accepted,
		});
		for (const s of skipped) {
			problems.push({
				subject: s.subject,
				certificate: s.certificate,
				error: new CertificateeError("SOURCE_OLDER", s.message, {
					context: { file: s.subject, certificate: s.certificate },
					hint: `to serve this file anyway (a key compromise, a CA change), run certificatee replace ${s.certificate} --reason "…"; otherwise remove it (the certificate served stays)`,
				}),
			});
		}
		previous = servedNow(previous, served, now, `source ${config.name}: `);
		await deps.memory?.save(previous);
		const held = heldNow(previous, loaded);
		const result = { certificates: served, problems: problems.map((p) => withHeldHint(p, held)) };
		// A read error may clear by itself: such a load is never reused.
		last = parsed.some((p) => "unreadable" in p)
			? undefined
			: {
					grouped,
					parsed,
					from: now.getTime(),
					until: changesAfter(parsed, served, now),
					accepted: acceptedKey,
					result,
				};
		return result;
	}

	// Files parsed while too recent to trust are parsed again at the next load: right after a first load of
	// thousands of files (all written moments before) that next load would be the one a renewal wakes, paying
	// for every file instead of the changed few. So in the daemon (the source is watched), once they are old
	// enough, the source reads them again in the background (yielding, on worker threads when many): the cache
	// then trusts them, and no cycle runs for it.
	const racyMs = deps.racyMs ?? DEFAULT_RACY_MS;
	let watchers = 0;
	let settleTimer: NodeJS.Timeout | undefined;
	const settle = () => {
		settleTimer = undefined;
		if (watchers === 0 || !listing) return;
		void readCandidates(cache, config.path, listing.grouped.candidates, {
			signal: new AbortController().signal,
			...(deps.workers === undefined ? {} : { workers: deps.workers }),
		})
			.then(scheduleSettle)
			// A file that went away or cannot be read: the next load reports it.
			.catch(() => undefined);
	};
	const scheduleSettle = () => {
		if (cache.untrusted > 0 && watchers > 0 && settleTimer === undefined) {
			settleTimer = setTimeout(settle, racyMs + SETTLE_MARGIN_MS);
			settleTimer.unref();
		}
	};
	return {
		name: config.name,
		async load(signal) {
			const result = await load(signal);
			scheduleSettle();
			return result;
		},
		get untrusted() {
			return cache.untrusted;
		},
		watch(onChange) {
			watchers++;
			const stop = watchDirectory(config, onChange);
			return () => {
				watchers--;
				if (watchers === 0 && settleTimer) {
					clearTimeout(settleTimer);
					settleTimer = undefined;
				}
				stop();
			};
		},
	};
}

/** What this load served, as the next load's memory; each keeps the time it was first served under its name. */
function servedNow(
	before: ReadonlyMap<string, Previous>,
	served: readonly DesiredCertificate[],
	now: Date,
	/** What precedes the file in a certificate's origin. */
	prefix: string,
): Map<string, Previous> {
	const out = new Map<string, Previous>();
	for (const d of served) {
		const was = before.get(d.name);
		const since = was?.fingerprint === d.bundle.leaf.fingerprint ? was.since : now;
		const file = d.origin.startsWith(prefix) ? d.origin.slice(prefix.length) : d.origin;
		out.set(d.name, previousOf(d, file, since));
	}
	return out;
}

/** The certificates served in place of what their files hold now (an invalid or older file). */
function heldNow(
	served: ReadonlyMap<string, Previous>,
	loaded: readonly LoadedFile[],
): Map<string, Previous> {
	const fromFile = new Map(loaded.map((f) => [f.name, f.bundle.leaf.fingerprint]));
	return new Map([...served].filter(([name, p]) => fromFile.get(name) !== p.fingerprint));
}

/**
 * A problem of a file whose certificate is held (the last valid one stays served): its hint says so, and that
 * removing the file removes the certificate.
 */
function withHeldHint(p: SourceProblem, held: ReadonlyMap<string, Previous>): SourceProblem {
	const h = p.certificate === undefined ? undefined : held.get(p.certificate);
	const leaf = h?.certificate()?.bundle.leaf;
	if (h === undefined || leaf === undefined) return p;
	const kept = `the last valid certificate of "${p.certificate}" (serial ${leaf.serial}, expires ${leaf.notAfter.toISOString()}, from ${h.file}) stays served until then; removing the file removes the certificate`;
	const hint =
		p.error.code === "SOURCE_OLDER"
			? `to serve this file anyway (a key compromise, a CA change), run certificatee replace ${p.certificate} --reason "…"; ${kept}`
			: `${p.error.hint ? `${p.error.hint}; ` : ""}fix the file: ${kept}`;
	const error = new CertificateeError(p.error.code, p.error.message, {
		context: { ...p.error.context, certificate: p.certificate },
		hint,
		retryable: p.error.retryable,
	});
	return { ...p, error };
}

/** After the racy window: past the file times' granularity for sure. */
const SETTLE_MARGIN_MS = 100;

function sameNames(a: readonly string[], b: readonly string[]): boolean {
	return a.length === b.length && a.every((f, i) => f === b[i]);
}

function unchanged(last: LastLoad, grouped: Grouped, parsed: readonly ReadOutcome[], now: number): boolean {
	return (
		last.from <= now &&
		now < last.until &&
		last.grouped === grouped &&
		last.parsed.length === parsed.length &&
		last.parsed.every((p, i) => p === parsed[i])
	);
}

/** When the first certificate read or served (an older one kept) expires or becomes valid. */
function changesAfter(
	parsed: readonly ReadOutcome[],
	served: readonly DesiredCertificate[],
	now: Date,
): number {
	let until = Number.POSITIVE_INFINITY;
	for (const p of parsed) if (p.ok) until = Math.min(until, checkChangesAfter(p.bundle, now));
	for (const d of served) until = Math.min(until, checkChangesAfter(d.bundle, now));
	return until;
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

/**
 * Every candidate's parse: the cached one when its files did not change, else read and parsed again (many at
 * once spread over worker threads). Each outcome is remembered under the identity seen before reading.
 */
async function readCandidates(
	cache: ParsedCache,
	dir: string,
	candidates: readonly Candidate[],
	options: ParseAllOptions,
): Promise<ReadOutcome[]> {
	cache.retain(new Set(candidates.map((c) => c.name)));
	const out: ReadOutcome[] = [];
	const misses: Array<{ at: number; c: Candidate; seen: Identity }> = [];
	for (const [at, c] of candidates.entries()) {
		try {
			const found = cache.lookup(dir, c);
			if ("hit" in found) out[at] = found.hit;
			else misses.push({ at, c, seen: found.miss });
		} catch (e) {
			// A file that went away between readdir and stat.
			out[at] = { ok: false, unreadable: e };
		}
	}
	const { outcomes: fresh } = await parseAll(
		dir,
		misses.map((m) => m.c),
		options,
	);
	for (const [i, m] of misses.entries()) {
		const outcome = fresh[i] as ReadOutcome;
		out[m.at] = "unreadable" in outcome ? outcome : cache.remember(dir, m.c, m.seen, outcome);
	}
	return out;
}

/** Each parse checked against `now`: the valid ones, and a problem per invalid or unreadable one (in order). */
function checkCandidates(
	dir: string,
	candidates: readonly Candidate[],
	parsed: readonly ReadOutcome[],
	now: Date,
	problems: SourceProblem[],
): { loaded: LoadedFile[]; invalid: Set<string> } {
	const loaded: LoadedFile[] = [];
	const invalid = new Set<string>();
	for (const [i, c] of candidates.entries()) {
		const outcome = parsed[i] as ReadOutcome;
		const subject = candidateFiles(c)
			.map((f) => join(dir, f))
			.join(" + ");
		if ("unreadable" in outcome) {
			invalid.add(c.name);
			problems.push({
				subject,
				certificate: c.name,
				error: new CertificateeError(
					"SOURCE_UNREADABLE",
					`${subject}: ${describeError(outcome.unreadable)}`,
					{
						context: { file: subject },
						retryable: true,
					},
				),
			});
			continue;
		}
		const errors = outcome.ok
			? checkBundle(outcome.bundle, { source: sourceFileOf(dir, c), now })
			: [outcome.error];
		if (outcome.ok && errors.length === 0) loaded.push({ name: c.name, subject, bundle: outcome.bundle });
		else {
			invalid.add(c.name);
			for (const error of errors) problems.push({ subject, certificate: c.name, error });
		}
	}
	return { loaded, invalid };
}

/**
 * Calls onChange once the directory has been quiet for `debounce`, or `MAX_WAIT_DEBOUNCES` × `debounce` after
 * the first change of a burst if it keeps changing (a tool writing thousands of files must not hold every
 * renewal back until it is done). Returns the stop function.
 */
function watchDirectory(config: DirectorySourceConfig, onChange: () => void): () => void {
	let quiet: NodeJS.Timeout | undefined;
	let latest: NodeJS.Timeout | undefined;
	let watcher: FSWatcher | undefined;
	const run = () => {
		clearTimeout(quiet);
		clearTimeout(latest);
		latest = undefined;
		onChange();
	};
	const fire = () => {
		clearTimeout(quiet);
		quiet = setTimeout(run, config.debounce);
		latest ??= setTimeout(run, config.debounce * MAX_WAIT_DEBOUNCES);
	};
	try {
		watcher = fsWatch(config.path, { persistent: false }, fire);
		// The directory may disappear; the next load reports it.
		watcher.on("error", fire);
	} catch {
		// Not watchable now (missing): periodic loads still pick it up.
	}
	return () => {
		clearTimeout(quiet);
		clearTimeout(latest);
		watcher?.close();
	};
}

const MAX_WAIT_DEBOUNCES = 10;
