/**
 * After every write of the cycle: one reload at most, when something written is live only after one and the
 * budget and the breaker allow it; then every changed name is probed. A reload that fails, or after which the
 * node does not serve what was written, opens the breaker.
 */

import type { ReloadsView, StepView } from "../../../reconcile/report.js";
import { type EndpointJob, type EndpointState, NEVER_ABORTED, type Probed } from "./endpoint-state.js";
import type { EndpointDriver } from "./model.js";
import { redoAfterReloads } from "./redo-step.js";
import {
	breakerCloses,
	budgetView,
	decideReload,
	describeNeeds,
	pruneHistory,
	type ReloadDecision,
	type ReloadNeed,
} from "./reload-budget.js";
import { judgeReload, nextReloadsView } from "./reload-judgement.js";

/** What only a reload makes live after this cycle's writes: planned new files, and writes the driver could not hot-swap. */
export function reloadNeedsOf(planned: readonly ReloadNeed[], steps: readonly StepView[]): ReloadNeed[] {
	const storageOk = (ref: string) =>
		steps.every((s) => s.ref !== ref || !s.op.startsWith("storage-") || s.result === "ok");
	return [
		...planned.filter((n) => storageOk(n.ref)),
		...steps.flatMap((s) =>
			s.reloadNeeded && storageOk(s.ref)
				? [{ ref: s.ref, ...(s.certificate ? { certificate: s.certificate } : {}), reason: s.reloadNeeded }]
				: [],
		),
	];
}

/** The reloads view before the writes: the budget, the reloads of the last hour and the breaker remembered. */
export function initialReloads(job: EndpointJob): ReloadsView | undefined {
	const { reloads } = job;
	return (
		reloads && {
			budget: budgetView(reloads.maxPerHour, reloads.history, job.now()),
			recent: pruneHistory(reloads.history, job.now()),
			...(reloads.breaker ? { breaker: reloads.breaker } : {}),
		}
	);
}

/**
 * An open breaker, in sync: it closes when every probed name serves what was written; else nothing is written to
 * this node until it does, or an operator clears it.
 */
export function breakerGate(job: EndpointJob, state: EndpointState, servedBefore: Probed): EndpointState {
	const breaker = state.reloads?.breaker;
	if (job.mode !== "sync" || state.reloads === undefined || breaker === undefined) return state;
	if (breakerCloses(servedBefore.map((s) => s.view))) {
		const { breaker: _closed, ...reloads } = state.reloads;
		const note = `reload breaker closed: every probed name serves what was written (open since ${breaker.openedAt})`;
		return { ...state, reloads, notes: [...state.notes, note] };
	}
	for (const view of state.steps) {
		view.result = "skipped";
		view.note = "reload breaker open: no writes to this endpoint";
	}
	return state;
}

/** One reload when the budget and the breaker allow it, the steps settled on the worker it starts. */
export async function reloadStep(
	job: EndpointJob,
	planned: readonly ReloadNeed[],
	state: EndpointState,
): Promise<EndpointState> {
	const budget = job.reloads;
	const view = state.reloads;
	if (budget === undefined || view === undefined) return state;
	const needs = reloadNeedsOf(planned, state.steps);
	const decision = decideReload({
		now: job.now(),
		maxPerHour: budget.maxPerHour,
		history: budget.history,
		...(budget.breaker && view.breaker ? { breaker: budget.breaker } : {}),
		needs,
		writesDurable: state.steps.every((s) => !s.op.startsWith("storage-") || s.result === "ok"),
	});
	if (decision.action === "none") return state;
	const certificates = [...new Set(needs.flatMap((n) => (n.certificate ? [n.certificate] : [])))];
	if (decision.action === "hold" || job.driver.reload === undefined || job.signal.aborted) {
		return holdReload(job, state, { decision, needs, certificates });
	}
	const at = job.now();
	const why = `certificatee reloaded HAProxy (${describeNeeds(needs)})`;
	const outcome = await reload(job, needs, state);
	// The new worker loaded the disk: settle every step on what it holds, and redo what only memory had.
	const after = outcome.ok
		? await redoAfterReloads(job, { ...state, notes: [] }, "certificatee reloaded HAProxy")
		: { ...state, notes: [] };
	const judgement = judgeReload({ needs, desired: job.desired, state: after, outcome });
	const { reasons } = decision;
	return {
		...after,
		// A new file the reload made live is no longer waiting for one.
		notes: [...withoutNotesOf(state.notes, judgement.result === "ok" ? needs : []), ...after.notes],
		reloads: nextReloadsView({ budget, at, now: job.now(), reasons, certificates, why, judgement }),
	};
}

/** No reload now: every step waiting for one says why, and the view says the reload was held. */
function holdReload(
	job: EndpointJob,
	state: EndpointState,
	held: {
		decision: Exclude<ReloadDecision, { action: "none" }>;
		needs: ReloadNeed[];
		certificates: string[];
	},
): EndpointState {
	const { decision, needs, certificates } = held;
	const code = decision.action === "hold" ? decision.code : "RELOAD_DISABLED";
	const message =
		decision.action === "hold"
			? decision.message
			: `pending a reload (${describeNeeds(needs)}): ${job.signal.aborted ? "stopping" : "this target cannot reload"}`;
	for (const s of state.steps)
		if (s.reloadNeeded) s.note = `${s.note ? `${s.note}; ` : ""}${code}: ${message}`;
	const cycle = { decision: "held" as const, reasons: decision.reasons, certificates, code, message };
	return { ...state, ...(state.reloads ? { reloads: { ...state.reloads, cycle } } : {}) };
}

/** The driver's reload, through the write queue, for the refs whose files it is to load. */
function reload(job: EndpointJob, needs: readonly ReloadNeed[], state: EndpointState) {
	const written = needs.flatMap((n) => {
		const d = job.desired.find((x) => x.ref === n.ref);
		return d ? [{ ref: n.ref, bundle: d.certificate.bundle }] : [];
	});
	const run = () => (job.driver.reload as NonNullable<EndpointDriver["reload"]>)(NEVER_ABORTED, written);
	return state.queue ? state.queue.run(run) : run();
}

/** The notes without those of the needs given: each need names the plan's note that it waits for a reload. */
function withoutNotesOf(notes: readonly string[], needs: readonly ReloadNeed[]): string[] {
	const waiting = new Set(needs.flatMap((n) => n.note ?? []));
	return notes.filter((n) => !waiting.has(n));
}
