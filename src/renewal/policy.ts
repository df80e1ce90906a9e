/**
 * When to order a certificate: one pure function over everything that matters (the current certificate's
 * dates, the configured window, the jitter drawn when it was stored, an ARI window, recent failures and
 * orders). No clock, no randomness, no I/O: the caller passes `now` and the stored jitter.
 */
import { formatDuration } from "../base/duration.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

export const POLICY_DEFAULTS = {
	renewFraction: 1 / 3,
	/** Lifetimes under this (Let's Encrypt's `shortlived`, 160 h) renew at shortRenewFraction instead. */
	shortLifetimeMs: 10 * DAY,
	/** Renew at half of a short lifetime (without ARI or a configured window), as Let's Encrypt advises. */
	shortRenewFraction: 1 / 2,
	/** The backoff cap is at most this share of the lifetime (and at least backoffInitialMs). */
	backoffLifetimeShare: 1 / 100,
	backoffInitialMs: MINUTE,
	/** Transient failures double up to this; a permanent one (needs a human) waits this long at once. */
	backoffMaxMs: HOUR,
	maxOrdersPerDay: 5,
	/** Below this fraction of the lifetime left, renew now even while backing off. */
	emergencyFraction: 1 / 20,
	/** The jitter spreads renewAt over this share of the renewal window, from its start. */
	jitterShare: 1 / 3,
} as const;

export interface RenewalPolicyConfig {
	/** Renew when less than this fraction of the lifetime is left (default 1/3). */
	renewFraction?: number;
	/** Renew this long before notAfter; overrides renewFraction. */
	renewBeforeMs?: number;
	/** Loop breaker: at most this many orders per certificate in any 24 h (default 5). */
	maxOrdersPerDay?: number;
}

export interface RenewalPolicyInput {
	now: Date;
	/** The certificate in service, absent when none was ever issued. */
	current?: { notBefore: Date; notAfter: Date };
	/** The stored certificate no longer matches its config (names or key type changed). */
	mismatch?: string;
	config?: RenewalPolicyConfig;
	/** In [0, 1), drawn once when the certificate was stored. */
	jitter: number;
	/** The CA's suggested window (ACME ARI), when it offers one; it replaces the configured window. */
	ari?: { start: Date; end: Date };
	/** Consecutive failed orders since the last success. */
	failures: number;
	lastFailureAt?: Date;
	/** The last failure will not go away by retrying (a permanent ACME problem): back off to the cap at once. */
	lastFailurePermanent?: boolean;
	/** Successful orders (and ones in flight when a process died); only the last 24 h matter. */
	orders: readonly Date[];
	/** An operator asked for an order now (`certificatee renew --force`): backoff and the loop breaker are cleared. */
	forced?: boolean;
}

export type RenewalReason =
	| "NotIssued"
	| "Mismatch"
	| "Scheduled"
	| "AriWindow"
	| "Due"
	| "Emergency"
	| "Backoff"
	| "BreakerOpen"
	| "Forced";

export type RenewalDecision =
	| { action: "renew-now"; at: Date; reason: RenewalReason; message: string }
	| { action: "wait"; at: Date; reason: RenewalReason; message: string }
	| { action: "breaker-open"; at: Date; reason: "BreakerOpen"; message: string };

/** The moment the certificate should be renewed, before backoff and breaker: jitter applied, inside the window. */
export function renewAt(
	current: { notBefore: Date; notAfter: Date },
	jitter: number,
	config: RenewalPolicyConfig = {},
	ari?: { start: Date; end: Date },
): { at: Date; reason: "Scheduled" | "AriWindow" } {
	const j = Math.min(Math.max(jitter, 0), 0.999_999);
	const lifetime = current.notAfter.getTime() - current.notBefore.getTime();
	if (ari && ari.end.getTime() >= ari.start.getTime()) {
		// A window reaching past the emergency floor (or past notAfter) is capped there: the floor always applies.
		const floor = current.notAfter.getTime() - lifetime * POLICY_DEFAULTS.emergencyFraction;
		const start = Math.min(ari.start.getTime(), floor);
		const end = Math.min(ari.end.getTime(), floor);
		return { at: new Date(start + Math.floor(j * (end - start))), reason: "AriWindow" };
	}
	const before = Math.min(
		config.renewBeforeMs ?? lifetime * (config.renewFraction ?? defaultRenewFraction(lifetime)),
		lifetime,
	);
	const windowStart = current.notAfter.getTime() - before;
	return {
		at: new Date(windowStart + Math.floor(j * before * POLICY_DEFAULTS.jitterShare)),
		reason: "Scheduled",
	};
}

/** The share of the lifetime left at which renewal starts by default: 1/3, or 1/2 under 10 days. */
export function defaultRenewFraction(lifetimeMs: number): number {
	return lifetimeMs < POLICY_DEFAULTS.shortLifetimeMs
		? POLICY_DEFAULTS.shortRenewFraction
		: POLICY_DEFAULTS.renewFraction;
}

/**
 * The longest wait between two attempts after failures (the backoff cap, and the wait after a permanent
 * failure): 1 h, or 1/100 of a shorter lifetime, never under 1 min. A 6-day certificate waits at most 1 h, a
 * 1-day one 14.4 min; the emergency floor (1/20 of the lifetime) is then at least five such waits.
 */
export function retryIntervalMs(lifetimeMs?: number): number {
	if (lifetimeMs === undefined) return POLICY_DEFAULTS.backoffMaxMs;
	const share = Math.floor(lifetimeMs * POLICY_DEFAULTS.backoffLifetimeShare);
	return Math.min(POLICY_DEFAULTS.backoffMaxMs, Math.max(POLICY_DEFAULTS.backoffInitialMs, share));
}

/** 1 min after the first failure, doubling, at most retryIntervalMs(lifetime) (1 h for lifetimes of 100 h or more). */
export function backoffMs(failures: number, lifetimeMs?: number): number {
	if (failures <= 0) return 0;
	const exp = Math.min(failures - 1, 30);
	return Math.min(POLICY_DEFAULTS.backoffInitialMs * 2 ** exp, retryIntervalMs(lifetimeMs));
}

function breaker(input: RenewalPolicyInput): RenewalDecision | undefined {
	const limit = input.config?.maxOrdersPerDay ?? POLICY_DEFAULTS.maxOrdersPerDay;
	const since = input.now.getTime() - DAY;
	const recent = input.orders
		.map((d) => d.getTime())
		.filter((t) => t > since)
		.sort((a, b) => a - b);
	if (recent.length < limit) return undefined;
	// Closes when enough of the recent orders have aged out of the 24 h window.
	const reopen = new Date((recent[recent.length - limit] ?? input.now.getTime()) + DAY);
	return {
		action: "breaker-open",
		at: reopen,
		reason: "BreakerOpen",
		message: `${recent.length} orders in the last 24h (limit ${limit}); no order before ${reopen.toISOString()}`,
	};
}

function due(input: RenewalPolicyInput): { at: Date; reason: RenewalReason; message: string } {
	if (!input.current) return { at: input.now, reason: "NotIssued", message: "no certificate issued yet" };
	if (input.mismatch) return { at: input.now, reason: "Mismatch", message: input.mismatch };
	const r = renewAt(input.current, input.jitter, input.config, input.ari);
	if (r.at.getTime() > input.now.getTime()) {
		const where = r.reason === "AriWindow" ? "inside the CA's suggested window" : "inside the renewal window";
		return { at: r.at, reason: r.reason, message: `renewal scheduled ${where}` };
	}
	return {
		at: r.at,
		reason: "Due",
		message: `renewal due since ${r.at.toISOString()}; ${formatDuration(Math.max(0, input.current.notAfter.getTime() - input.now.getTime()))} left`,
	};
}

function isEmergency(input: RenewalPolicyInput): boolean {
	if (!input.current) return false;
	const lifetime = input.current.notAfter.getTime() - input.current.notBefore.getTime();
	const left = input.current.notAfter.getTime() - input.now.getTime();
	return left <= lifetime * POLICY_DEFAULTS.emergencyFraction;
}

/**
 * Decide whether to order now. Order of checks: not yet due → wait; loop breaker open → breaker-open (even in an
 * emergency: a certificate that keeps failing must not hammer the CA); emergency floor → renew now, ignoring
 * backoff; backoff after failures → wait; otherwise renew now.
 */
export function decideRenewal(input: RenewalPolicyInput): RenewalDecision {
	if (input.forced)
		return {
			action: "renew-now",
			at: input.now,
			reason: "Forced",
			message: "renewal requested by an operator",
		};
	const d = due(input);
	if (d.at.getTime() > input.now.getTime() && !isEmergency(input)) return { action: "wait", ...d };
	const open = breaker(input);
	if (open) return open;
	if (isEmergency(input)) {
		return {
			action: "renew-now",
			at: input.now,
			reason: "Emergency",
			message: `less than ${POLICY_DEFAULTS.emergencyFraction * 100}% of the lifetime left; backoff ignored`,
		};
	}
	if (input.failures > 0 && input.lastFailureAt) {
		const lifetime = input.current
			? input.current.notAfter.getTime() - input.current.notBefore.getTime()
			: undefined;
		const wait = input.lastFailurePermanent ? retryIntervalMs(lifetime) : backoffMs(input.failures, lifetime);
		const retryAt = new Date(input.lastFailureAt.getTime() + wait);
		if (retryAt.getTime() > input.now.getTime()) {
			return {
				action: "wait",
				at: retryAt,
				reason: "Backoff",
				message: input.lastFailurePermanent
					? `needs a human: the CA refused permanently; retrying after ${formatDuration(wait)} (fix the cause, then certificatee renew --force)`
					: `${input.failures} failed order(s); retrying after ${formatDuration(wait)} backoff`,
			};
		}
	}
	return { action: "renew-now", at: input.now, reason: d.reason, message: d.message };
}
