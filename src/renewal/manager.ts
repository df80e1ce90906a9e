/**
 * The renewal manager: for each configured certificate, read its state, ask the policy, order from its issuer
 * when due, validate what came back with the certificate model (an invalid result is never stored), store it,
 * and record the attempt (failures, backoff, loop breaker). It returns the desired certificates it holds plus a
 * status per certificate. Time and randomness are inputs; one certificate's failure never stops the others.
 */
import pLimit from "p-limit";
import { checkBundle, nameSet, parseBundle, sameNameSet } from "../certificates/index.js";
import type { Bundle } from "../certificates/types.js";
import { CertificateeError, describeError, isCertificateeError } from "../errors.js";
import type {
	DesiredCertificate,
	RenewalState as RenewalStateName,
	SourceProblem,
} from "../reconcile/model.js";
import type { Issuer, RenewalWindow } from "../sources/types.js";
import {
	type CertificateRecord,
	type RenewalState,
	readCertificateRecord,
	readRenewalState,
	type StoredRecord,
	writeRenewalState,
} from "../store/records.js";
import type { StateStore } from "../store/types.js";
import { type OrderResult, order } from "./order.js";
import {
	backoffMs,
	decideRenewal,
	type RenewalDecision,
	type RenewalPolicyConfig,
	renewAt,
	retryIntervalMs,
} from "./policy.js";
import type { CertificateSpec, RenewalSettings } from "./schema.js";

const DAY = 86_400_000;

/** pino-compatible, so the daemon can pass its logger. */
export interface RenewalLogger {
	info(fields: object, message: string): void;
	warn(fields: object, message: string): void;
}

export interface RenewalDeps {
	store: StateStore;
	/** Issuers by their config name. */
	issuers: ReadonlyMap<string, Issuer>;
	certificates: readonly CertificateSpec[];
	settings?: Partial<RenewalSettings>;
	log?: RenewalLogger;
	/**
	 * Issue-once across replicas (a cluster): taken before an order, released after it; undefined when another
	 * process holds it (that one orders). Under the lock the state is read again, so an order another process
	 * completed meanwhile is seen and not repeated.
	 */
	issueLock?: (certificate: string) => Promise<IssueLock | undefined>;
}

export interface IssueLock {
	release(): Promise<void>;
}

export interface RenewalRun {
	now: Date;
	/** Uniform in [0, 1); used for the jitter drawn when a certificate is stored. */
	random: () => number;
	signal: AbortSignal;
	/** Decide but never order or write (for `plan`): the status tells what a real run would do. */
	dryRun?: boolean;
}

/** JSON-safe status of one managed certificate, for `status`, metrics and logs. */
export interface CertificateStatus {
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
	state: RenewalStateName;
	lastError?: { code: string; message: string; hint?: string; retryable?: boolean };
	/** Orders an operator forced (renew --force, revoke), ever. */
	forcedRenewals: number;
}

export interface RenewalReport {
	certificates: DesiredCertificate[];
	statuses: CertificateStatus[];
	problems: SourceProblem[];
}

interface Outcome {
	status: CertificateStatus;
	desired?: DesiredCertificate;
	problems: SourceProblem[];
}

export async function runRenewal(deps: RenewalDeps, run: RenewalRun): Promise<RenewalReport> {
	const limit = pLimit(deps.settings?.concurrency ?? 4);
	const outcomes = await Promise.all(deps.certificates.map((spec) => limit(() => renewOne(deps, spec, run))));
	return {
		certificates: outcomes.flatMap((o) => (o.desired ? [o.desired] : [])),
		statuses: outcomes.map((o) => o.status),
		problems: outcomes.flatMap((o) => o.problems),
	};
}

async function renewOne(deps: RenewalDeps, spec: CertificateSpec, run: RenewalRun): Promise<Outcome> {
	try {
		return deps.issueLock && !run.dryRun
			? await renewUnderLock(deps, deps.issueLock, spec, run)
			: await renewOneUnsafe(deps, spec, run);
	} catch (e) {
		const error = isCertificateeError(e)
			? e
			: new CertificateeError("INTERNAL", `renewal of "${spec.name}": ${describeError(e)}`, { cause: e });
		// Never "now": the daemon wakes at the earliest next renewal, and an error that repeats (a corrupt state
		// file) would make it cycle every second. A retryable error is tried again soon, anything else needs a human.
		const retryAt = new Date(run.now.getTime() + (error.retryable ? backoffMs(1) : ERROR_RETRY_MS));
		// Reported once, through the status (state failing, lastError), not a second time as a source problem.
		const problems: SourceProblem[] = [];
		const desired = await lastServable(deps, spec, run.now, problems, error);
		return {
			...(desired ? { desired } : {}),
			status: {
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
			},
			problems,
		};
	}
}

/**
 * Decides without ordering; when an order is due, takes the issue lock and decides again from a fresh read
 * (another replica may have ordered meanwhile), so one certificate is never ordered twice at once.
 */
async function renewUnderLock(
	deps: RenewalDeps,
	issueLock: NonNullable<RenewalDeps["issueLock"]>,
	spec: CertificateSpec,
	run: RenewalRun,
): Promise<Outcome> {
	const look = await renewOneUnsafe(deps, spec, { ...run, dryRun: true });
	if (look.status.decision.action !== "renew-now") return look;
	const lock = await issueLock(spec.name);
	if (!lock) return { ...look, status: { ...look.status, state: "ordering" } };
	try {
		return await renewOneUnsafe(deps, spec, run);
	} finally {
		await lock.release().catch((e: unknown) => {
			// It expires with the lease anyway; the next order only waits for that.
			deps.log?.warn({ certificate: spec.name }, `issue lock not released: ${describeError(e)}`);
		});
	}
}

/** How long a certificate whose renewal cannot even be decided (corrupt state, unknown issuer) waits: 1 h. */
const ERROR_RETRY_MS = 60 * 60_000;

/**
 * The stored certificate, still served while its renewal is broken: a corrupt renewal state must not take a
 * valid certificate out of the desired set. Its own problems are added to `problems`.
 */
async function lastServable(
	deps: RenewalDeps,
	spec: CertificateSpec,
	now: Date,
	problems: SourceProblem[],
	already: CertificateeError,
): Promise<DesiredCertificate | undefined> {
	try {
		const current = currentBundle(await readCertificateRecord(deps.store, spec.name), spec, problems);
		return current && servable(current.bundle, spec, now, problems);
	} catch (e) {
		if (isCertificateeError(e) && e.message !== already.message)
			problems.push({ subject: spec.name, error: e });
		return undefined;
	}
}

function issuerNamed(deps: RenewalDeps, spec: CertificateSpec, name: string): Issuer {
	const issuer = deps.issuers.get(name);
	if (!issuer) {
		throw new CertificateeError(
			"CONFIG_INVALID",
			`certificate "${spec.name}" names unknown issuer "${name}"`,
			{
				context: { certificate: spec.name, field: "issuer" },
				hint: `configure a source of type local-ca or acme named "${name}"`,
			},
		);
	}
	return issuer;
}

async function renewOneUnsafe(deps: RenewalDeps, spec: CertificateSpec, run: RenewalRun): Promise<Outcome> {
	const chain = spec.issuers.map((name) => issuerNamed(deps, spec, name));
	const record = await readCertificateRecord(deps.store, spec.name);
	const issuedBy = chain.find((i) => i.name === record?.value.history[0]?.issuer) ?? chain[0]!;
	let issuedByName = record?.value.history[0]?.issuer;
	let issuedProfile = record?.value.history[0]?.profile;
	const stateRecord = await readRenewalState(deps.store, spec.name);
	let state: RenewalState = stateRecord?.value ?? { jitter: run.random(), failures: 0, orders: [] };
	let stateVersion = stateRecord?.version ?? 0;
	const problems: SourceProblem[] = [];
	let current = currentBundle(record, spec, problems);
	let window = current ? await ariWindow(issuedBy, current.bundle.certPem, run.signal, deps.log) : undefined;
	const decide = () => decideRenewal(policyInput(spec, deps, state, current, window, run.now));
	let decision = decide();
	let ordered: RenewalDecision | undefined;
	let bundle = current?.bundle;
	if (decision.action === "renew-now" && !run.dryRun) {
		ordered = decision;
		// Each issuer of the fallback list at most once per run; the next one only after a permanent failure or
		// `fallback_after` transient ones in a row on the current one.
		for (let tried = 0; tried < chain.length; tried++) {
			const index = Math.min(state.issuerIndex ?? 0, chain.length - 1);
			const issuer = chain[index]!;
			// Count the order before placing it, so a crash in the middle still feeds the loop breaker.
			state = { ...state, lastAttemptAt: run.now.toISOString(), orders: recentOrders(state, run.now, true) };
			stateVersion = await writeRenewalState(deps.store, spec.name, state, stateVersion);
			const result = await order({ store: deps.store, issuer, spec, previous: record }, run);
			state = recordOutcome(state, result, run.now, policyConfig(spec, deps));
			if (result.ok) {
				bundle = result.bundle;
				current = { bundle };
				window = undefined;
				// The next renewal starts again from the preferred issuer.
				state = { ...state, issuerIndex: 0, failuresOnIssuer: 0 };
				issuedByName = issuer.name;
				issuedProfile = result.profile;
				deps.log?.info(
					{ certificate: spec.name, issuer: issuer.name, serial: result.bundle.leaf.serial },
					"certificate issued",
				);
				break;
			}
			// Logged by whoever reports the cycle, once per change (the daemon), not here on every attempt.
			problems.push({ subject: spec.name, error: result.error, order: true });
			const onIssuer = (state.failuresOnIssuer ?? 0) + 1;
			const moveOn = chain.length > 1 && (!result.error.retryable || onIssuer >= spec.fallback_after);
			state = { ...state, failuresOnIssuer: moveOn ? 0 : onIssuer };
			if (!moveOn) break;
			state = { ...state, issuerIndex: (index + 1) % chain.length };
			deps.log?.warn(
				{ certificate: spec.name, from: issuer.name, to: chain[(index + 1) % chain.length]!.name },
				`falling back to the next issuer after ${result.error.code}`,
			);
		}
		// A success after a fallback: the earlier issuers' failures were logged as warnings, not problems.
		if (issuedByName !== undefined && state.failures === 0) {
			const kept = problems.filter((p) => !p.order);
			problems.splice(0, problems.length, ...kept);
		}
		decision = decide();
		state = { ...state, nextAttemptAt: decision.at.toISOString() };
		await writeRenewalState(deps.store, spec.name, state, stateVersion);
	}
	const desired = bundle && servable(bundle, spec, run.now, problems);
	return {
		status: {
			...status(spec, state, decision, ordered, bundle, run.now),
			// Which issuer issued the certificate in service, else the one the next order goes to.
			issuer: issuedByName ?? spec.issuers[state.issuerIndex ?? 0] ?? spec.issuer,
			...(bundle && issuedProfile !== undefined ? { profile: issuedProfile } : {}),
		},
		...(desired ? { desired } : {}),
		problems,
	};
}

function policyConfig(spec: CertificateSpec, deps: RenewalDeps): RenewalPolicyConfig {
	return {
		...(spec.renew_before !== undefined ? { renewBeforeMs: spec.renew_before } : {}),
		...(spec.renew_fraction !== undefined ? { renewFraction: spec.renew_fraction } : {}),
		maxOrdersPerDay: deps.settings?.max_orders_per_day ?? 5,
	};
}

function policyInput(
	spec: CertificateSpec,
	deps: RenewalDeps,
	state: RenewalState,
	current: { bundle: Bundle; mismatch?: string } | undefined,
	ari: RenewalWindow | undefined,
	now: Date,
) {
	return {
		now,
		...(current ? { current: current.bundle.leaf } : {}),
		...(current?.mismatch ? { mismatch: current.mismatch } : {}),
		config: policyConfig(spec, deps),
		jitter: state.jitter,
		...(ari ? { ari } : {}),
		failures: state.failures,
		...(state.lastFailureAt ? { lastFailureAt: new Date(state.lastFailureAt) } : {}),
		...(state.lastError?.retryable === false ? { lastFailurePermanent: true } : {}),
		orders: state.orders.map((o) => new Date(o)),
		...(state.forceRequestedAt ? { forced: true } : {}),
	};
}

function recentOrders(state: RenewalState, now: Date, add: boolean): string[] {
	const kept = state.orders.filter((o) => Date.parse(o) > now.getTime() - DAY);
	return add ? [...kept, now.toISOString()] : kept;
}

/** The newest stored certificate, parsed; a mismatch with the config (names, key type, issuer) is noted. */
function currentBundle(
	record: StoredRecord<CertificateRecord> | undefined,
	spec: CertificateSpec,
	problems: SourceProblem[],
): { bundle: Bundle; mismatch?: string } | undefined {
	const latest = record?.value.history[0];
	if (!latest) return undefined;
	let bundle: Bundle;
	try {
		bundle = parseBundle(
			{ cert: latest.certPem, chain: latest.chainPem, key: latest.keyPem },
			{ source: `state certificates/${spec.name}` },
		);
	} catch (e) {
		if (isCertificateeError(e)) problems.push({ subject: spec.name, error: e });
		return undefined;
	}
	const mismatch = !sameNameSet(latest.domains, spec.domains)
		? `names changed: ${nameSet(latest.domains).join(", ")} -> ${nameSet(spec.domains).join(", ")}`
		: latest.keyType !== spec.key_type
			? `key type changed: ${latest.keyType} -> ${spec.key_type}`
			: !spec.issuers.includes(latest.issuer)
				? `issuer changed: ${latest.issuer} -> ${spec.issuers.join(", ")}`
				: undefined;
	return { bundle, ...(mismatch ? { mismatch } : {}) };
}

async function ariWindow(issuer: Issuer, certPem: string, signal: AbortSignal, log?: RenewalLogger) {
	if (!issuer.renewalWindow) return undefined;
	try {
		return await issuer.renewalWindow(certPem, signal);
	} catch (e) {
		// ARI is advice: without it the configured window applies.
		log?.warn({ issuer: issuer.name }, `renewal window unavailable: ${describeError(e)}`);
		return undefined;
	}
}

/** The renewal state after an order: a success resets failures and draws the next renewAt; a failure counts. */
function recordOutcome(
	state: RenewalState,
	result: OrderResult,
	now: Date,
	config: RenewalPolicyConfig,
): RenewalState {
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

/** The stored certificate is desired while it is valid at `now`, even when its names no longer match. */
function servable(
	bundle: Bundle,
	spec: CertificateSpec,
	now: Date,
	problems: SourceProblem[],
): DesiredCertificate | undefined {
	const errors = checkBundle(bundle, { source: `state certificates/${spec.name}`, now });
	if (errors.length > 0) {
		for (const error of errors) problems.push({ subject: spec.name, error });
		return undefined;
	}
	return {
		name: spec.name,
		names: nameSet([...bundle.leaf.dnsNames, ...bundle.leaf.ipAddresses]),
		bundle,
		origin: `issuer ${spec.issuer}: ${spec.name} (serial ${bundle.leaf.serial})`,
	};
}

function status(
	spec: CertificateSpec,
	state: RenewalState,
	decision: RenewalDecision,
	ordered: RenewalDecision | undefined,
	bundle: Bundle | undefined,
	now: Date,
): CertificateStatus {
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

/** An attempt recorded without an outcome this recently is an order another process has in flight. */
const ORDER_IN_FLIGHT_MS = 10 * 60_000;

/** The one-word state `status` shows, from the stored state and the policy's decision. Pure. */
export function renewalState(
	state: RenewalState,
	decision: RenewalDecision,
	orderedNow: boolean,
	now: Date,
): RenewalStateName {
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
export function earliestRenewal(statuses: readonly CertificateStatus[]): Date | undefined {
	const times = statuses.map((s) => Date.parse(s.nextRenewalAt)).filter((t) => Number.isFinite(t));
	return times.length === 0 ? undefined : new Date(Math.min(...times));
}
