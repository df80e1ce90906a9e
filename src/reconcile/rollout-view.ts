/** A rollout as the report, plan, status and metrics carry it: its stage, its canaries' checks, what halted it. */
import type { TrustStore } from "../certificates/trust.js";

export type RolloutCheck = "serial" | "chain" | "key-types" | "trust";
export type RolloutStage = "canary" | "hold" | "rest" | "halted";

/** What a canary check found, as the endpoint report carries it. */
export interface CheckResult {
	certificate: string;
	check: RolloutCheck;
	ok: boolean;
	code?: string;
	message?: string;
	hint?: string;
}

/** What halted a rollout: the canary, the check that failed there and why. */
export interface RolloutFailure {
	endpoint: string;
	check: RolloutCheck;
	code: string;
	message: string;
	hint?: string;
	at: string;
}

/** A rollout as plan, status, /status.json and the metrics show it. */
export interface RolloutView {
	certificate: string;
	serial: string;
	stage: RolloutStage;
	canaries: string[];
	/** The endpoints after the canaries, in the order they go (all at once, once the hold is over). */
	rest: string[];
	startedAt: string;
	verified: string[];
	holdUntil?: string;
	completedAt?: string;
	failure?: RolloutFailure;
}

/** What the canaries of a certificate check, and against what. */
export interface VerifySpec {
	checks: readonly RolloutCheck[];
	trust?: TrustStore;
}
