/**
 * Figures the page shows that the summary does not spell out, derived from the status document alone:
 * per target converged/total endpoints, duplicates removed and reloads caused in the cycle. Pure.
 */
import type { StatusDocument } from "../status-view.js";

export interface TargetFacts {
	target: string;
	kind: string;
	converged: number;
	total: number;
}

export interface RemovedRef {
	target: string;
	endpoint: string;
	ref: string;
}

export interface ReloadFact {
	target: string;
	endpoint: string;
	op: string;
	ref: string;
	reason: string;
	reloadId?: string;
}

/** Endpoints converged per target, with the same states as `status` (summary.endpoints). */
export function targetFacts(doc: StatusDocument): TargetFacts[] {
	return doc.targets.map((t) => {
		const endpoints = doc.summary.endpoints.filter((e) => e.target === t.target);
		return {
			target: t.target,
			kind: t.kind,
			converged: endpoints.filter((e) => e.state === "converged").length,
			total: endpoints.length,
		};
	});
}

/** Refs deleted in the cycle (storage and runtime of one ref count once), as certificatee_legacy_duplicates counts them. */
export function removedRefs(doc: StatusDocument): RemovedRef[] {
	return doc.targets.flatMap((t) =>
		t.endpoints.flatMap((e) =>
			[
				...new Set(
					e.steps
						.filter((s) => (s.op === "storage-delete" || s.op === "runtime-delete") && s.result === "ok")
						.map((s) => s.ref),
				),
			].map((ref) => ({ target: e.target, endpoint: e.endpoint, ref })),
		),
	);
}

/** Reloads an endpoint scheduled in answer to the cycle's writes (certificatee_reloads_caused_total). */
export function reloadFacts(doc: StatusDocument): ReloadFact[] {
	return doc.targets.flatMap((t) =>
		t.endpoints.flatMap((e) =>
			e.steps.flatMap((s) =>
				s.reloadCaused
					? [
							{
								target: e.target,
								endpoint: e.endpoint,
								op: s.op,
								ref: s.ref,
								reason: s.reloadCaused.reason,
								...(s.reloadCaused.reloadId ? { reloadId: s.reloadCaused.reloadId } : {}),
							},
						]
					: [],
			),
		),
	);
}

/**
 * An endpoint's reload budget as the report carries it (`reloads` on an endpoint of a HAProxy target that
 * has one): read structurally, and only when present, so the page renders reports with and without it.
 */
export interface EndpointReloads {
	budget: { maxPerHour: number; used: number; remaining: number; nextAt?: string };
	recent: ReadonlyArray<{ at: string; reasons: readonly string[]; result: string }>;
	cycle?: { decision: string; reasons: readonly string[]; code?: string; message: string; result?: string };
	breaker?: { openedAt: string; code: string; message: string };
}

export interface BudgetFact extends EndpointReloads {
	target: string;
	endpoint: string;
}

function isEndpointReloads(value: unknown): value is EndpointReloads {
	if (typeof value !== "object" || value === null || !("budget" in value) || !("recent" in value))
		return false;
	const { budget, recent } = value;
	return (
		typeof budget === "object" &&
		budget !== null &&
		"maxPerHour" in budget &&
		typeof budget.maxPerHour === "number" &&
		Array.isArray(recent)
	);
}

/** Every endpoint that reports a reload budget, with it. */
export function budgetFacts(doc: StatusDocument): BudgetFact[] {
	return doc.targets.flatMap((t) =>
		t.endpoints.flatMap((e) => {
			const reloads: unknown = "reloads" in e ? e.reloads : undefined;
			return isEndpointReloads(reloads) ? [{ target: e.target, endpoint: e.endpoint, ...reloads }] : [];
		}),
	);
}
