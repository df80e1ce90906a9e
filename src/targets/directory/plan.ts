/**
 * The directory target's decisions, pure: each observed set classified (in-sync, missing, stale), and the
 * writes that bring it in sync: publish the set, then run on_change (configured); a set in sync whose
 * on_change has not succeeded since its files changed gets on_change alone.
 */
import type { Verdict } from "../../reconcile/classify.js";
import type { DesiredCertificate, DirectoryAction } from "../../reconcile/model.js";
import type { PlannedStep } from "../../reconcile/plan.js";
import type { ObservedSet } from "./index.js";

type Observed = Extract<ObservedSet, { ok: true }>;

/** "target does not exist" is what atomicdir says of a set with no files yet. */
export function classifySet(set: Observed): Extract<Verdict, { class: "in-sync" | "stale" | "missing" }> {
	const base = { ref: set.path, certificate: set.certificate };
	if (set.differences.length === 0) return { class: "in-sync", ...base };
	if (set.differences.includes("target does not exist")) return { class: "missing", ...base };
	return { class: "stale", ...base, sides: ["storage"], missingSides: [] };
}

/** The steps of one set, in order; none for a set that could not be observed (its error is reported instead). */
export function planSet(
	set: ObservedSet,
	desired: ReadonlyMap<string, DesiredCertificate>,
	onChange: boolean,
): PlannedStep<DirectoryAction>[] {
	const certificate = desired.get(set.certificate);
	if (!set.ok || certificate === undefined) return [];
	const ref = set.path;
	const hook = (why: string): PlannedStep<DirectoryAction> => ({
		action: { op: "on-change", ref, certificate: set.certificate },
		why,
	});
	if (set.differences.length === 0) {
		return set.hookPending && onChange
			? [hook("retrying: it has not succeeded since the files changed")]
			: [];
	}
	const write: PlannedStep<DirectoryAction> = {
		action: { op: "directory-write", ref, certificate: set.certificate, bundle: certificate.bundle },
		why: set.differences.join("; "),
	};
	return onChange ? [write, hook("files changed")] : [write];
}
