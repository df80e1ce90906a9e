/**
 * `type: directory`: serves the valid certificates found in a directory of PEM files (see files.ts for the
 * layout). Each file is parsed and checked with the certificate model; an invalid one is reported with its
 * reason and skipped while the others are served. watch() lets the daemon react to changes promptly.
 */
import { join } from "node:path";
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import type { SourceProblem } from "../../reconcile/model.js";
import type { Source, SourceResult } from "../types.js";
import { groupFiles } from "./files.js";
import { heldNow, olderFileProblem, servedNow, withHeldHint } from "./held.js";
import { changesAfter, type Grouped, type LastLoad, sameNames, unchanged } from "./last-load.js";
import type { Previous, SourceMemory } from "./memory.js";
import { createParsedCache, DEFAULT_RACY_MS } from "./parsed-cache.js";
import { checkCandidates, listFiles, readCandidates } from "./read.js";
import { type DirectorySourceConfig, directorySourceSchema } from "./schema.js";
import { selectNewest } from "./select.js";
import { watchDirectory } from "./watch.js";

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
		const replacements = await readReplacements(config, deps);
		if (last && last.accepted === replacements.key && unchanged(last, grouped, parsed, now.getTime()))
			return last.result;
		const problems = [...listingProblems(config, grouped), ...replacements.problems];
		const { loaded, invalid } = checkCandidates(config.path, grouped.candidates, parsed, now, problems);
		const { served, skipped } = selectNewest({
			loaded,
			previous,
			invalid,
			now,
			origin: (s) => `source ${config.name}: ${s}`,
			accepted: replacements.accepted,
		});
		problems.push(...skipped.map(olderFileProblem));
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
					accepted: replacements.key,
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

/** After the racy window: past the file times' granularity for sure. */
const SETTLE_MARGIN_MS = 100;

/** The deliberate replacements; unreadable, none is honoured (never-downgrade stays) and the reason is reported. */
async function readReplacements(
	config: DirectorySourceConfig,
	deps: DirectorySourceDeps,
): Promise<{ accepted: ReadonlyMap<string, string>; key: string; problems: SourceProblem[] }> {
	let accepted: ReadonlyMap<string, string> = new Map<string, string>();
	const problems: SourceProblem[] = [];
	try {
		accepted = (await deps.replacements?.()) ?? accepted;
	} catch (e) {
		const error = isCertificateeError(e)
			? e
			: new CertificateeError("STATE_CORRUPT", `deliberate replacements unreadable: ${describeError(e)}`);
		problems.push({ subject: `source ${config.name}: replacements`, error });
	}
	return { accepted, key: JSON.stringify([...accepted].sort()), problems };
}

/** The listing's own problems: files that belong to no certificate, or clash (files.ts). */
function listingProblems(config: DirectorySourceConfig, grouped: Grouped): SourceProblem[] {
	return grouped.problems.map((p) => ({
		subject: join(config.path, p.file),
		error: new CertificateeError(p.code, `${join(config.path, p.file)}: ${p.message}`, {
			context: { file: join(config.path, p.file) },
		}),
	}));
}
