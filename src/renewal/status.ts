/**
 * The renewal status of one issued certificate, and the one-word state it shows: the one status every view reads
 * (`status`, /status.json, metrics, the fleet page), and the line of the cycle report made from it. Pure.
 */

import type { Bundle } from "../certificates/types.js";
import type { CertificateeError } from "../errors.js";
import type { RenewalState, RenewalView } from "../reconcile/model.js";
import type { RenewalRecord } from "../store/records.js";
import { type RenewalDecision, retryIntervalMs } from "./policy.js";
import type { CertificateSpec } from "./schema.js";

/** JSON-safe renewal status of one issued certificate (the `renewals` of /status.json). */
export interface RenewalStatus {
	name: string;
	issuer: string;
	/** The configured names. */
	domains: string[];
	/** An order was placed in this run (successful or not). */
	ordered: boolean;
	/** Why it was placed, when it was. */
	orderedBecause?: { reason: string; message: string };
	serial?: string;
	notAfter?: string;
	/** The ACME profile the certificate in service was issued under, when one was ordered. */
	profile?: string;
	/** The longest wait between two attempts after failures, for the certificate's lifetime (policy.ts). */
	retryIntervalMs: number;
	/** When the policy will next order (the decision's time), ISO. */
	nextRenewalAt: string;
	decision: { action: RenewalDecision["action"]; reason: string; message: string };
	failures: number;
	breakerOpen: boolean;
	/** issued, due, ordering, failing, backing-off or capped (see reconcile/report.ts). */
	state: RenewalState;
	lastError?: { code: string; message: string; hint?: string; retryable?: boolean };
	/** Orders an operator forced (renew --force, revoke), ever. */
	forcedRenewals: number;
}

/** The status from the stored state and the policy's decision (`ordered`: the decision an order was placed on). */
export function certificateStatus(
	spec: CertificateSpec,
	state: RenewalRecord,
	decision: RenewalDecision,
	ordered: RenewalDecision | undefined,
	bundle: Bundle | undefined,
	now: Date,
): RenewalStatus {
	return {
		name: spec.name,
		issuer: spec.issuer,
		domains: spec.domains,
		ordered: ordered !== undefined,
		...(ordered ? { orderedBecause: { reason: ordered.reason, message: ordered.message } } : {}),
		...(bundle ? { serial: bundle.leaf.serial, notAfter: bundle.leaf.notAfter.toISOString() } : {}),
		nextRenewalAt: decision.at.toISOString(),
		retryIntervalMs: retryIntervalMs(
			bundle ? bundle.leaf.notAfter.getTime() - bundle.leaf.notBefore.getTime() : undefined,
		),
		decision: { action: decision.action, reason: decision.reason, message: decision.message },
		failures: state.failures,
		forcedRenewals: state.forcedRenewals ?? 0,
		breakerOpen: decision.action === "breaker-open",
		state: renewalState(state, decision, ordered !== undefined, now),
		...(state.lastError ? { lastError: state.lastError } : {}),
	};
}

/** The status of a certificate whose renewal could not even be decided (corrupt state, unknown issuer). */
export function undecidedStatus(
	spec: CertificateSpec,
	error: CertificateeError,
	retryAt: Date,
): RenewalStatus {
	return {
		name: spec.name,
		issuer: spec.issuer,
		domains: spec.domains,
		ordered: false,
		nextRenewalAt: retryAt.toISOString(),
		retryIntervalMs: retryIntervalMs(),
		decision: { action: "wait", reason: "Error", message: error.message },
		failures: 0,
		forcedRenewals: 0,
		breakerOpen: false,
		state: "failing",
		lastError: { code: error.code, message: error.message, ...(error.hint ? { hint: error.hint } : {}) },
	};
}

/** An attempt recorded without an outcome this recently is an order another process has in flight. */
const ORDER_IN_FLIGHT_MS = 10 * 60_000;

/** The one-word state `status` shows, from the stored state and the policy's decision. Pure. */
export function renewalState(
	state: RenewalRecord,
	decision: RenewalDecision,
	orderedNow: boolean,
	now: Date,
): RenewalState {
	if (decision.action === "breaker-open") return "capped";
	const attempt = state.lastAttemptAt ? Date.parse(state.lastAttemptAt) : Number.NEGATIVE_INFINITY;
	const outcome = Math.max(
		state.lastSuccessAt ? Date.parse(state.lastSuccessAt) : Number.NEGATIVE_INFINITY,
		state.lastFailureAt ? Date.parse(state.lastFailureAt) : Number.NEGATIVE_INFINITY,
	);
	if (!orderedNow && attempt > outcome && now.getTime() - attempt < ORDER_IN_FLIGHT_MS) return "ordering";
	if (decision.action === "renew-now") return state.failures > 0 ? "failing" : "due";
	if (decision.reason === "Backoff") return "backing-off";
	return state.failures > 0 && state.lastError ? "failing" : "issued";
}

/** When the daemon should run again for renewals: the earliest next renewal time, if any certificate has one. */
export function earliestRenewal(statuses: readonly RenewalStatus[]): Date | undefined {
	const times = statuses.map((s) => Date.parse(s.nextRenewalAt)).filter((t) => Number.isFinite(t));
	return times.length === 0 ? undefined : new Date(Math.min(...times));
}

/** The status as the cycle report carries it (`renewals` of plan and sync --json, read by outcome and convergence). */
export function renewalView(s: RenewalStatus): RenewalView {
	return {
		certificate: s.name,
		issuer: s.issuer,
		names: s.domains,
		state: s.state,
		...(s.ordered
			? {
					order: {
						result: s.lastError && s.failures > 0 ? "failed" : "ok",
						reason: s.orderedBecause?.reason ?? "",
						message: s.orderedBecause?.message ?? "",
					},
				}
			: {}),
		nextAttemptAt: s.nextRenewalAt,
		reason: s.decision.reason,
		message: s.decision.message,
		failures: s.failures,
		...(s.lastError ? { lastError: s.lastError } : {}),
		...(s.serial ? { serial: s.serial } : {}),
		...(s.notAfter ? { notAfter: s.notAfter } : {}),
		...(s.profile ? { profile: s.profile } : {}),
	};
}
