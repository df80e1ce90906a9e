/** The last load of a directory source, and when its answer still holds for the next load. Pure. */
import { checkChangesAfter } from "../../certificates/index.js";
import type { DesiredCertificate } from "../../reconcile/model.js";
import type { SourceResult } from "../types.js";
import type { groupFiles } from "./files.js";
import type { ReadOutcome } from "./parse-pool.js";

/** The listing's grouping (files.ts). */
export type Grouped = ReturnType<typeof groupFiles>;

/**
 * The last load's inputs and answer. When the next load finds the same file names, every parse the same object
 * (no file changed) and its clock before the first moment a certificate expires or becomes valid, its answer is
 * the same, so it is returned as is: an unchanged directory costs a readdir and a stat per file.
 */
export interface LastLoad {
	/** The listing's grouping: the same object while the directory holds the same names. */
	grouped: Grouped;
	parsed: readonly ReadOutcome[];
	from: number;
	until: number;
	/** The deliberate replacements it was decided with. */
	accepted: string;
	result: SourceResult;
}

export function sameNames(a: readonly string[], b: readonly string[]): boolean {
	return a.length === b.length && a.every((f, i) => f === b[i]);
}

export function unchanged(
	last: LastLoad,
	grouped: Grouped,
	parsed: readonly ReadOutcome[],
	now: number,
): boolean {
	return (
		last.from <= now &&
		now < last.until &&
		last.grouped === grouped &&
		last.parsed.length === parsed.length &&
		last.parsed.every((p, i) => p === parsed[i])
	);
}

/** When the first certificate read or served (an older one kept) expires or becomes valid. */
export function changesAfter(
	parsed: readonly ReadOutcome[],
	served: readonly DesiredCertificate[],
	now: Date,
): number {
	let until = Number.POSITIVE_INFINITY;
	for (const p of parsed) if (p.ok) until = Math.min(until, checkChangesAfter(p.bundle, now));
	for (const d of served) until = Math.min(until, checkChangesAfter(d.bundle, now));
	return until;
}
