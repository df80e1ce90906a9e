/**
 * Reading a source directory: the names of its files, each candidate's parse (cached while its files did not
 * change, else read again), and each parse checked at a time into the valid ones and a problem per other one.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { checkBundle } from "../../certificates/index.js";
import { CertificateeError, describeError } from "../../errors.js";
import type { SourceProblem } from "../../reconcile/model.js";
import { type Candidate, candidateFiles } from "./files.js";
import { type ParseAllOptions, parseAll, type ReadOutcome } from "./parse-pool.js";
import { type Identity, type ParsedCache, sourceFileOf } from "./parsed-cache.js";
import type { DirectorySourceConfig } from "./schema.js";
import type { LoadedFile } from "./select.js";

/** The names of the files in the directory, or the problem that it cannot be read. */
export async function listFiles(config: DirectorySourceConfig): Promise<string[] | SourceProblem> {
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
export async function readCandidates(
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
export function checkCandidates(
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
