/**
 * The directory target's decisions, pure: each observed set classified (in-sync, missing, stale, refused),
 * and the writes that bring it in sync: publish the set, then run on_change (configured); a set in sync whose
 * on_change has not succeeded since its files changed gets on_change alone. With never-downgrade, a set whose
 * file holds a certificate that expires later than the desired one is refused: nothing is written.
 */

import { downgradeRefusal } from "../../reconcile/downgrade.js";
import type { DesiredCertificate, PlannedStep } from "../../reconcile/model.js";
import type { Verdict } from "../../reconcile/verdict.js";
import type { DirectoryAction } from "./action.js";
import type { ObservedSet } from "./index.js";

type Observed = Extract<ObservedSet, { ok: true }>;

export type SetVerdict = Extract<Verdict, { class: "in-sync" | "stale" | "missing" | "refused" }>;

export function classifySet(
	set: Observed,
	desired: DesiredCertificate | undefined,
	neverDowngrade = false,
): SetVerdict {
	const base = { ref: set.path, certificate: set.certificate };
	if (set.differences.length === 0) return { class: "in-sync", ...base };
	if (!set.exists) return { class: "missing", ...base };
	const downgrade =
		neverDowngrade && desired !== undefined && desired.replacement === undefined
			? downgradeRefusal([set.live], desired.bundle.leaf)
			: undefined;
	if (downgrade !== undefined)
		return { class: "refused", ...base, code: "UPDATE_WOULD_DOWNGRADE", why: downgrade };
	return { class: "stale", ...base, sides: ["storage"], missingSides: [] };
}

/** The steps of one set, in order; none for a set that could not be observed (its error is reported instead). */
export function planSet(
	set: ObservedSet,
	desired: ReadonlyMap<string, DesiredCertificate>,
	options: { onChange: boolean; neverDowngrade?: boolean },
): PlannedStep<DirectoryAction>[] {
	const certificate = desired.get(set.certificate);
	if (!set.ok || certificate === undefined) return [];
	if (classifySet(set, certificate, options.neverDowngrade).class === "refused") return [];
	const ref = set.path;
	const hook = (why: string): PlannedStep<DirectoryAction> => ({
		action: { op: "on-change", ref, certificate: set.certificate },
		why,
	});
	if (set.differences.length === 0) {
		return set.hookPending && options.onChange
			? [hook("retrying: it has not succeeded since the files changed")]
			: [];
	}
	const write: PlannedStep<DirectoryAction> = {
		action: { op: "directory-write", ref, certificate: set.certificate, bundle: certificate.bundle },
		why: set.differences.join("; "),
	};
	return options.onChange ? [write, hook("files changed")] : [write];
}
