/**
 * How the stored renewal state moves with each attempt: an order counted before it is placed, its outcome
 * recorded, the issuer fallback list walked; and the policy's input read from it. Pure.
 */
import type { RenewalWindow } from "../sources/types.js";
import type { RenewalRecord } from "../store/records.js";
import type { InService } from "./in-service.js";
import type { OrderResult } from "./order.js";
import { type RenewalPolicyConfig, renewAt } from "./policy.js";
import type { CertificateSpec, RenewalSettings } from "./schema.js";

const DAY = 86_400_000;

export function policyConfig(
	spec: CertificateSpec,
	settings: Partial<RenewalSettings> | undefined,
): RenewalPolicyConfig {
	return {
		...(spec.renew_before !== undefined ? { renewBeforeMs: spec.renew_before } : {}),
		...(spec.renew_fraction !== undefined ? { renewFraction: spec.renew_fraction } : {}),
		maxOrdersPerDay: settings?.max_orders_per_day ?? 5,
	};
}

/** What the policy decides from: the certificate in service, the CA's window (ARI) and the attempts so far. */
export function policyInput(
	config: RenewalPolicyConfig,
	state: RenewalRecord,
	current: InService | undefined,
	ari: RenewalWindow | undefined,
	now: Date,
) {
	return {
		now,
		...(current ? { current: current.bundle.leaf } : {}),
		...(current?.mismatch ? { mismatch: current.mismatch } : {}),
		config,
		jitter: state.jitter,
		...(ari ? { ari } : {}),
		failures: state.failures,
		...(state.lastFailureAt ? { lastFailureAt: new Date(state.lastFailureAt) } : {}),
		...(state.lastError?.retryable === false ? { lastFailurePermanent: true } : {}),
		orders: state.orders.map((o) => new Date(o)),
		...(state.forceRequestedAt ? { forced: true } : {}),
	};
}

/** An order about to be placed: counted first, so a crash in the middle still feeds the loop breaker. */
export function attemptStarted(state: RenewalRecord, now: Date): RenewalRecord {
	const kept = state.orders.filter((o) => Date.parse(o) > now.getTime() - DAY);
	return { ...state, lastAttemptAt: now.toISOString(), orders: [...kept, now.toISOString()] };
}

/** The renewal state after an order: a success resets failures and draws the next renewAt; a failure counts. */
export function recordOutcome(
	state: RenewalRecord,
	result: OrderResult,
	now: Date,
	config: RenewalPolicyConfig,
): RenewalRecord {
	// A forced order is one order: the request is used up whatever its outcome.
	const { forceRequestedAt: _r, ...unforced } = state;
	if (!result.ok) {
		const { code, message, hint, retryable } = result.error;
		const lastError = { code, message, ...(hint ? { hint } : {}), retryable };
		// The daily cap counts successful orders only: failures are paced by backoff instead.
		const orders = unforced.orders.filter((o) => o !== now.toISOString());
		return { ...unforced, orders, failures: state.failures + 1, lastFailureAt: now.toISOString(), lastError };
	}
	const next = renewAt(result.bundle.leaf, result.jitter, config);
	const { lastError: _e, lastFailureAt: _f, ...rest } = unforced;
	return {
		...rest,
		jitter: result.jitter,
		renewAt: next.at.toISOString(),
		failures: 0,
		lastSuccessAt: now.toISOString(),
	};
}

/** Which issuer of a fallback list of `issuers` the next order goes to (its index). */
export function issuerIndex(state: RenewalRecord, issuers: number): number {
	return Math.min(state.issuerIndex ?? 0, issuers - 1);
}

/** After an issued certificate: the next renewal starts again from the preferred issuer. */
export function afterIssued(state: RenewalRecord): RenewalRecord {
	return { ...state, issuerIndex: 0, failuresOnIssuer: 0 };
}

/**
 * After a failed order on the issuer at `index` of a list of `issuers`: the next one takes over after a
 * permanent failure or `fallbackAfter` transient ones in a row (`next`, its index); else the failure is counted
 * on the same issuer and it stays.
 */
export function afterFailedOrder(
	state: RenewalRecord,
	error: { retryable?: boolean },
	index: number,
	issuers: number,
	fallbackAfter: number,
): { state: RenewalRecord; next?: number } {
	const onIssuer = (state.failuresOnIssuer ?? 0) + 1;
	const moveOn = issuers > 1 && (!error.retryable || onIssuer >= fallbackAfter);
	if (!moveOn) return { state: { ...state, failuresOnIssuer: onIssuer } };
	const next = (index + 1) % issuers;
	return { state: { ...state, failuresOnIssuer: 0, issuerIndex: next }, next };
}
