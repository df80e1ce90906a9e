/**
 * A reload is an explicit, counted action with a reason, never a side effect. Pure: what needs a reload,
 * whether the budget (a sliding hour, per endpoint) allows one now, and what the breaker says. The edges
 * (reload-step.ts: the reload, the probe; the fleet runner: the memory) act on these answers.
 */

import type { BreakerState, BudgetView, ReloadReason, ReloadRecord } from "../../../reconcile/model.js";

export type { BreakerState, BudgetView, ReloadReason, ReloadRecord };
export const RELOAD_REASONS: readonly ReloadReason[] = ["new-certificate", "too-large"];

/** One ref whose written file only a reload makes live. */
export interface ReloadNeed {
	ref: string;
	certificate?: string;
	reason: ReloadReason;
	/** The plan's note that the ref waits for a reload: dropped from the report once a reload made it live. */
	note?: string;
}

export const BUDGET_WINDOW_MS = 3_600_000;

/** The reloads that count against the budget at `now`: those asked for in the last hour. */
export function reloadsInWindow(history: readonly ReloadRecord[], now: Date): ReloadRecord[] {
	const since = now.getTime() - BUDGET_WINDOW_MS;
	return history.filter((r) => {
		const at = Date.parse(r.at);
		return at > since && at <= now.getTime();
	});
}

/** What the memory keeps: the reloads of the last hour (older ones never count again). */
export function pruneHistory(history: readonly ReloadRecord[], now: Date): ReloadRecord[] {
	return reloadsInWindow(history, now);
}

export function budgetView(maxPerHour: number, history: readonly ReloadRecord[], now: Date): BudgetView {
	const counted = reloadsInWindow(history, now);
	const remaining = Math.max(0, maxPerHour - counted.length);
	const oldest = counted.map((r) => Date.parse(r.at)).sort((a, b) => a - b)[0];
	return {
		maxPerHour,
		used: counted.length,
		remaining,
		...(remaining === 0 && maxPerHour > 0 && oldest !== undefined
			? { nextAt: new Date(oldest + BUDGET_WINDOW_MS).toISOString() }
			: {}),
	};
}

export type HoldCode =
	| "RELOAD_DISABLED"
	| "RELOAD_BUDGET_EXHAUSTED"
	| "RELOAD_BREAKER_OPEN"
	| "RELOAD_WRITES_NOT_DURABLE";

export type ReloadDecision =
	| { action: "none" }
	| { action: "reload"; reasons: ReloadReason[]; budget: BudgetView }
	| { action: "hold"; code: HoldCode; reasons: ReloadReason[]; message: string; budget: BudgetView };

export interface ReloadInput {
	now: Date;
	maxPerHour: number;
	history: readonly ReloadRecord[];
	breaker?: BreakerState;
	needs: readonly ReloadNeed[];
	/** Every storage write of the cycle succeeded (a reload loads the disk as it is). */
	writesDurable: boolean;
}

/** At most one reload per endpoint per cycle: this decides that one. */
export function decideReload(input: ReloadInput): ReloadDecision {
	if (input.needs.length === 0) return { action: "none" };
	const reasons = RELOAD_REASONS.filter((r) => input.needs.some((n) => n.reason === r));
	const budget = budgetView(input.maxPerHour, input.history, input.now);
	const what = describeNeeds(input.needs);
	const hold = (code: HoldCode, why: string): ReloadDecision => ({
		action: "hold",
		code,
		reasons,
		message: `pending a reload (${what}): ${why}`,
		budget,
	});
	if (input.maxPerHour === 0) {
		return hold("RELOAD_DISABLED", "reloads are not allowed on this target (reloads.max_per_hour: 0)");
	}
	if (input.breaker !== undefined) {
		return hold(
			"RELOAD_BREAKER_OPEN",
			`the reload breaker is open since ${input.breaker.openedAt} (${input.breaker.message})`,
		);
	}
	if (!input.writesDurable) {
		return hold(
			"RELOAD_WRITES_NOT_DURABLE",
			"a storage write of this cycle failed; a reload would load it half done",
		);
	}
	if (budget.remaining === 0) {
		return hold(
			"RELOAD_BUDGET_EXHAUSTED",
			`budget exhausted: ${budget.used} of ${budget.maxPerHour} reloads in the last hour; the next is allowed at ${budget.nextAt}`,
		);
	}
	return { action: "reload", reasons, budget };
}

/** "too-large: big.pem; new-certificate: a.pem, b.pem" */
export function describeNeeds(needs: readonly ReloadNeed[]): string {
	return RELOAD_REASONS.flatMap((reason) => {
		const refs = [...new Set(needs.filter((n) => n.reason === reason).map((n) => n.ref))];
		return refs.length > 0 ? [`${reason}: ${refs.join(", ")}`] : [];
	}).join("; ");
}

/**
 * An open breaker closes when the endpoint serves what was written: every name probed matches. Without a
 * probe result nothing proves it, so it stays open (an operator clears it).
 */
export function breakerCloses(probes: ReadonlyArray<{ match: boolean }>): boolean {
	return probes.length > 0 && probes.every((p) => p.match);
}
