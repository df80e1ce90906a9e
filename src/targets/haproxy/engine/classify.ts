/**
 * Phase 2: classify every desired certificate and every observed ref of one endpoint, from the complete
 * observation. Pure: plain data in, verdicts out; no I/O, clock or logger. Each keeper first
 * (classify-keeper.ts), then every other ref through a chain of small rules (classify-duplicates.ts), then the
 * names another ref serves or may serve (classify-served.ts).
 */

import type { Verdict } from "../../../reconcile/verdict.js";
import type { ClassifyContext, ClassifyInput } from "./classification.js";
import { classifyOther } from "./classify-duplicates.js";
import { classifyKeeper } from "./classify-keeper.js";
import { mayBeShadowed, shadowedByProbe } from "./classify-served.js";
import type { ObservedRef } from "./model.js";
import { keeperRef } from "./placement.js";

export type {
	PendingCrtListChange,
	RefusalCode,
	Side,
	Verdict,
	VerdictClass,
} from "../../../reconcile/verdict.js";
export type { ClassifyInput, DuplicatePolicy } from "./classification.js";

/** Each desired certificate at its keeper: its canonical ref, or the ref HAProxy loads it from (placement.ts). */
export function keepersInPlace(
	desired: ClassifyInput["desired"],
	refs: ReadonlyMap<string, ObservedRef>,
): ClassifyInput["desired"] {
	const taken = new Set(desired.map((d) => d.ref));
	return desired.map((d) => {
		const ref = keeperRef(d.ref, d.certificate, refs, taken);
		taken.add(ref);
		return ref === d.ref ? d : { ref, certificate: d.certificate };
	});
}

export function classifyEndpoint(input: ClassifyInput): Verdict[] {
	const byRef = new Map(input.refs.map((r) => [r.ref, r]));
	const desired = keepersInPlace(input.desired, byRef);
	const ofKeepers = desired.map(
		(d) => [d.ref, classifyKeeper(d.ref, d.certificate, byRef.get(d.ref), input.policy)] as const,
	);
	const keepers = new Map(ofKeepers);
	const ctx: ClassifyContext = { input, desired, byRef, keepers };
	const verdicts = [
		...ofKeepers.map(([, v]) => v),
		...input.refs.filter((r) => !keepers.has(r.ref)).map((r) => classifyOther(r, ctx)),
	];
	if (input.unprobed) verdicts.push(...mayBeShadowed(desired, input.refs, verdicts));
	verdicts.push(...shadowedByProbe(desired, input.refs, input.served ?? []));
	return verdicts;
}
