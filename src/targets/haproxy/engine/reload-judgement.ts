/**
 * After a reload: did the node come back serving what was written, and what the budget and the breaker say
 * next. Pure; reload-step.ts reloads, observes and probes, then asks these.
 */

import type { ReloadsView, ServedView } from "../../../reconcile/report.js";
import type { EndpointJob } from "./endpoint-state.js";
import type { ObservedRef, ReloadOutcome } from "./model.js";
import { sideMatches } from "./ref-content.js";
import {
	breakerCloses,
	budgetView,
	pruneHistory,
	type ReloadNeed,
	type ReloadReason,
	type ReloadRecord,
} from "./reload-budget.js";

export interface ReloadJudgement {
	result: ReloadRecord["result"];
	message: string;
}

/**
 * A reload is ok when every changed name probed serves what was written, or, where no name was probed, when the
 * new worker holds every ref the reload was for.
 */
export function judgeReload(input: {
	needs: readonly ReloadNeed[];
	desired: EndpointJob["desired"];
	state: { served: ReadonlyArray<{ view: ServedView }>; observation: { refs: readonly ObservedRef[] } };
	outcome: ReloadOutcome;
}): ReloadJudgement {
	const { needs, desired, state, outcome } = input;
	if (!outcome.ok) return { result: "failed", message: `${outcome.error.code}: ${outcome.error.message}` };
	const changed = new Set(needs.flatMap((n) => (n.certificate ? [n.certificate] : [])));
	const probed = state.served.filter((s) => changed.has(s.view.certificate)).map((s) => s.view);
	const refs = new Map(state.observation.refs.map((r) => [r.ref, r]));
	const held = needs.every((n) => {
		const want = desired.find((d) => d.ref === n.ref)?.certificate.bundle.leaf;
		return want !== undefined && sideMatches(refs.get(n.ref)?.runtime, want);
	});
	if (probed.length > 0 ? breakerCloses(probed) : held) {
		return { result: "ok", message: `${outcome.detail}; every changed name serves what was written` };
	}
	const wrong =
		probed.filter((p) => !p.match).map((p) => `${p.sni} serves ${p.servedSerial ?? p.error ?? "?"}`)[0] ??
		"the new worker does not hold what was written";
	return { result: "not-served", message: `${outcome.detail}; but ${wrong}` };
}

/** The reloads view after a reload: it counts against the budget, and one that is not ok opens the breaker. */
export function nextReloadsView(input: {
	budget: { maxPerHour: number; history: readonly ReloadRecord[] };
	/** When the reload was asked for, and now, after it. */
	at: Date;
	now: Date;
	reasons: ReloadReason[];
	certificates: string[];
	/** What the reload was for, in a sentence. */
	why: string;
	judgement: ReloadJudgement;
}): ReloadsView {
	const { budget, at, now, reasons, certificates, why, judgement } = input;
	const { result } = judgement;
	const record: ReloadRecord = { at: at.toISOString(), reasons, result };
	const message = `${why}: ${judgement.message}`;
	const next: ReloadsView = {
		budget: budgetView(budget.maxPerHour, [...budget.history, record], now),
		recent: pruneHistory([...budget.history, record], now),
		cycle: { decision: "reloaded", reasons, certificates, message, result },
	};
	if (result !== "ok") next.breaker = { openedAt: at.toISOString(), code: "RELOAD_FAILED", message };
	return next;
}
