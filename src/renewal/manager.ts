/**
 * The renewal manager: for each configured certificate, read its state, ask the policy, order from its issuer
 * when due, validate what came back with the certificate model (an invalid result is never stored), store it,
 * and record the attempt (failures, backoff, loop breaker). It returns the desired certificates it holds plus a
 * status per certificate. Time and randomness are inputs; one certificate's failure never stops the others.
 */
import pLimit from "p-limit";
import { CertificateeError, describeError, isCertificateeError } from "../errors.js";
import type { DesiredCertificate, SourceProblem } from "../reconcile/model.js";
import { issuerTypes } from "../sources/kinds.js";
import type { Issuer, RenewalWindow } from "../sources/types.js";
import {
	type CertificateRecord,
	type RenewalRecord,
	readCertificateRecord,
	readRenewalRecord,
	type StoredRecord,
	writeRenewalRecord,
} from "../store/records.js";
import type { StateStore } from "../store/types.js";
import {
	afterFailedOrder,
	afterIssued,
	attemptStarted,
	issuerIndex,
	policyConfig,
	policyInput,
	recordOutcome,
} from "./attempts.js";
import { currentBundle, type InService, servable } from "./in-service.js";
import { order } from "./order.js";
import { backoffMs, decideRenewal, type RenewalDecision } from "./policy.js";
import type { CertificateSpec, RenewalSettings } from "./schema.js";
import { certificateStatus, type RenewalStatus, undecidedStatus } from "./status.js";

export { earliestRenewal, renewalState } from "./status.js";

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

export interface RenewalReport {
	certificates: DesiredCertificate[];
	statuses: RenewalStatus[];
	problems: SourceProblem[];
}

interface Outcome {
	status: RenewalStatus;
	desired?: DesiredCertificate;
	problems: SourceProblem[];
}

/**
 * What lets a renewal place an order: being the only process that orders (no cluster), or holding the issue
 * lock for the certificate (a cluster). A renewal without one decides only (a plan, or the look before the lock).
 */
type OrderPermit = { by: "sole-process" } | { by: "issue-lock"; lock: IssueLock };

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
		if (run.dryRun) return await renewCertificate(deps, spec, run, undefined);
		if (!deps.issueLock) return await renewCertificate(deps, spec, run, { by: "sole-process" });
		return await renewUnderLock(deps, deps.issueLock, spec, run);
	} catch (e) {
		return await undecided(deps, spec, run.now, e);
	}
}

/** A renewal that could not be decided: failing, tried again later, its stored certificate still served. */
async function undecided(deps: RenewalDeps, spec: CertificateSpec, now: Date, e: unknown): Promise<Outcome> {
	const error = isCertificateeError(e)
		? e
		: new CertificateeError("INTERNAL", `renewal of "${spec.name}": ${describeError(e)}`, { cause: e });
	// Never "now": the daemon wakes at the earliest next renewal, and an error that repeats (a corrupt state
	// file) would make it cycle every second. A retryable error is tried again soon, anything else needs a human.
	const retryAt = new Date(now.getTime() + (error.retryable ? backoffMs(1) : ERROR_RETRY_MS));
	// Reported once, through the status (state failing, lastError), not a second time as a source problem.
	const problems: SourceProblem[] = [];
	const desired = await lastServable(deps, spec, now, problems, error);
	return { ...(desired ? { desired } : {}), status: undecidedStatus(spec, error, retryAt), problems };
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
	const look = await renewCertificate(deps, spec, run, undefined);
	if (look.status.decision.action !== "renew-now") return look;
	const lock = await issueLock(spec.name);
	if (!lock) return { ...look, status: { ...look.status, state: "ordering" } };
	try {
		return await renewCertificate(deps, spec, run, { by: "issue-lock", lock });
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
				hint: `configure a source of type ${issuerTypes.join(" or ")} named "${name}"`,
			},
		);
	}
	return issuer;
}

/** One certificate's renewal as read from the store, then as this run's orders leave it. */
interface Renewal {
	/** The issuer fallback list, preferred first. */
	chain: Issuer[];
	record: StoredRecord<CertificateRecord> | undefined;
	state: RenewalRecord;
	stateVersion: number;
	current: InService | undefined;
	/** The CA's suggested window for the certificate in service (ARI). */
	window: RenewalWindow | undefined;
	/** Who issued the certificate in service, and under which profile. */
	issuedBy: string | undefined;
	issuedProfile: string | undefined;
	problems: SourceProblem[];
}

/** Decides from the stored state; orders when due and `permit` allows it, then records the attempt. */
async function renewCertificate(
	deps: RenewalDeps,
	spec: CertificateSpec,
	run: RenewalRun,
	permit: OrderPermit | undefined,
): Promise<Outcome> {
	let renewal = await readRenewal(deps, spec, run);
	const decide = (r: Renewal) =>
		decideRenewal(policyInput(policyConfig(spec, deps.settings), r.state, r.current, r.window, run.now));
	let decision = decide(renewal);
	const ordered = decision.action === "renew-now" && permit !== undefined ? decision : undefined;
	if (ordered) {
		renewal = await orderFromChain(deps, spec, run, renewal);
		decision = decide(renewal);
		const state = { ...renewal.state, nextAttemptAt: decision.at.toISOString() };
		await writeRenewalRecord(deps.store, spec.name, state, renewal.stateVersion);
		renewal = { ...renewal, state };
	}
	return outcomeOf(spec, renewal, decision, ordered, run.now);
}

async function readRenewal(deps: RenewalDeps, spec: CertificateSpec, run: RenewalRun): Promise<Renewal> {
	const chain = spec.issuers.map((name) => issuerNamed(deps, spec, name));
	const record = await readCertificateRecord(deps.store, spec.name);
	const latest = record?.value.history[0];
	const issuedBy = chain.find((i) => i.name === latest?.issuer) ?? chain[0]!;
	const stateRecord = await readRenewalRecord(deps.store, spec.name);
	const state: RenewalRecord = stateRecord?.value ?? { jitter: run.random(), failures: 0, orders: [] };
	const problems: SourceProblem[] = [];
	const current = currentBundle(record, spec, problems);
	const window = current
		? await ariWindow(issuedBy, current.bundle.certPem, run.signal, deps.log)
		: undefined;
	return {
		chain,
		record,
		state,
		stateVersion: stateRecord?.version ?? 0,
		current,
		window,
		issuedBy: latest?.issuer,
		issuedProfile: latest?.profile,
		problems,
	};
}

/**
 * Orders from the fallback list: each issuer at most once per run, the next one only after a permanent failure
 * or `fallback_after` transient ones in a row on the current one (attempts.ts). Stops at the first certificate.
 */
async function orderFromChain(
	deps: RenewalDeps,
	spec: CertificateSpec,
	run: RenewalRun,
	renewal: Renewal,
): Promise<Renewal> {
	const { chain } = renewal;
	let { state, stateVersion } = renewal;
	const problems = [...renewal.problems];
	for (let tried = 0; tried < chain.length; tried++) {
		const index = issuerIndex(state, chain.length);
		const issuer = chain[index]!;
		state = attemptStarted(state, run.now);
		stateVersion = await writeRenewalRecord(deps.store, spec.name, state, stateVersion);
		const result = await order({ store: deps.store, issuer, spec, previous: renewal.record }, run);
		state = recordOutcome(state, result, run.now, policyConfig(spec, deps.settings));
		if (result.ok) {
			deps.log?.info(
				{ certificate: spec.name, issuer: issuer.name, serial: result.bundle.leaf.serial },
				"certificate issued",
			);
			return {
				...renewal,
				state: afterIssued(state),
				stateVersion,
				current: { bundle: result.bundle },
				window: undefined,
				issuedBy: issuer.name,
				issuedProfile: result.profile,
				// The earlier issuers' failures were logged as warnings: they are no problems after a success.
				problems: problems.filter((p) => !p.order),
			};
		}
		// Logged by whoever reports the cycle, once per change (the daemon), not here on every attempt.
		problems.push({ subject: spec.name, error: result.error, order: true });
		const after = afterFailedOrder(state, result.error, index, chain.length, spec.fallback_after);
		state = after.state;
		if (after.next === undefined) break;
		deps.log?.warn(
			{ certificate: spec.name, from: issuer.name, to: chain[after.next]!.name },
			`falling back to the next issuer after ${result.error.code}`,
		);
	}
	return { ...renewal, state, stateVersion, problems };
}

function outcomeOf(
	spec: CertificateSpec,
	renewal: Renewal,
	decision: RenewalDecision,
	ordered: RenewalDecision | undefined,
	now: Date,
): Outcome {
	const { state, issuedProfile } = renewal;
	const bundle = renewal.current?.bundle;
	const problems = [...renewal.problems];
	const desired = bundle && servable(bundle, spec, now, problems);
	return {
		status: {
			...certificateStatus(spec, state, decision, ordered, bundle, now),
			// Which issuer issued the certificate in service, else the one the next order goes to.
			issuer: renewal.issuedBy ?? spec.issuers[state.issuerIndex ?? 0] ?? spec.issuer,
			...(bundle && issuedProfile !== undefined ? { profile: issuedProfile } : {}),
		},
		...(desired ? { desired } : {}),
		problems,
	};
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
