/**
 * What a cycle found and did: JSON-safe, free of key material. `plan --json` prints it unchanged. What it means
 * (failed, pending, converged) is decided in failures.ts, convergence.ts and outcome.ts.
 */
import type { ErrorView } from "../errors.js";
import type {
	Action,
	BreakerState,
	BudgetView,
	ReloadReason,
	ReloadRecord,
	RenewalView,
	ReplacementView,
	ServingAfter,
} from "./model.js";
import type { CheckResult, RolloutView } from "./rollout-view.js";
import type { Verdict } from "./verdict.js";

export type { RenewalState, RenewalView } from "./model.js";

/** One line of the audit trail (audit.ts): a write, a removal, or a name whose served certificate changed. */
export interface AuditEvent {
	event: "write" | "removal" | "served-change";
	target: string;
	endpoint: string;
	certificate?: string;
	ref?: string;
	op?: string;
	crtList?: string;
	/** served-change: the SNI name probed. */
	sni?: string;
	/** What the ref (or the name) held before; absent when it held nothing or the side does not say. */
	oldSerial?: string;
	/** What was written (or is served now); absent for a removal. */
	newSerial?: string;
	/** served-change: the name now serves the desired certificate. */
	match?: boolean;
}

/** An action as shown in plans and reports: never the bundle, only its identity. */
export interface StepView {
	op: string;
	ref: string;
	certificate?: string;
	/** Serial of the certificate being written. */
	serial?: string;
	crtList?: string;
	why: string;
	/** Absent in a plan; set once applied. */
	result?: "ok" | "failed" | "skipped";
	error?: ErrorView;
	note?: string;
	/** Refused by the configuration (why): not failed, the ref is kept and synced from the next cycle. */
	pinned?: string;
	reloadCaused?: { reloadId?: string; reason: string };
	/** Written to disk; only a reload makes it live. */
	reloadNeeded?: ReloadReason;
}

/** An endpoint's reloads: the budget, the reloads of the last hour and why, this cycle's decision, the breaker. */
export interface ReloadsView {
	budget: BudgetView;
	/** Reloads in the last hour (oldest first). */
	recent: ReloadRecord[];
	/** This cycle: a reload done (ok, failed, not-served), or held with the code and why. */
	cycle?: {
		decision: "reloaded" | "held";
		reasons: ReloadReason[];
		/** The certificates the reload is for (their names are not served until it happens). */
		certificates: string[];
		code?: string;
		message: string;
		result?: ReloadRecord["result"];
	};
	breaker?: BreakerState;
}

export interface ServedView {
	sni: string;
	certificate: string;
	expectedSerial: string;
	servedSerial?: string;
	match: boolean;
	error?: string;
	/**
	 * The listener answered and refused this name's handshake with a TLS alert: it holds no certificate for the
	 * name (and key type) yet. A write that deploys one fixes it; an unreachable probe address is not this.
	 */
	noCertificate?: true;
}

/**
 * A certificate this cycle did not write to the endpoint, and why: `trust` (its chain does not verify against the
 * trust store: a failure, `failed`), `rollout` (a rollout stage has not reached the endpoint, or halted: pending,
 * or `failed` on a canary whose verification failed). Its steps are in the report, skipped (sync) with the reason.
 */
export interface HeldView {
	certificate: string;
	kind: "trust" | "rollout";
	code: string;
	message: string;
	hint?: string;
	failed: boolean;
}

export interface EndpointReport {
	target: string;
	endpoint: string;
	ok: boolean;
	error?: ErrorView;
	verdicts: Verdict[];
	steps: StepView[];
	notes: string[];
	/** crt-list file lines naming a certificate file that does not exist (each one fails the next reload). */
	crtListProblems?: Array<{ crtList: string; line: number; file: string }>;
	/** Which ref serves each name of every certificate written at runtime, once the writes ran (as planned). */
	servingAfter?: ServingAfter[];
	served: ServedView[];
	/** Refs observed, with expiry and class, for metrics (unmanaged ones too). */
	refs: Array<{ ref: string; class: Verdict["class"]; notAfter?: string }>;
	durationMs: number;
	/** The endpoint failed this many sync cycles in a row and sync sits out `skipLeft` more (remembered). */
	backoff?: { failures: number; skipLeft: number };
	/** HAProxy endpoints: the reload budget, reloads done and why, and the breaker. */
	reloads?: ReloadsView;
	/** sync: every write and removal done, and every served change a probe saw (audit.ts); logged one per line. */
	audit?: AuditEvent[];
	/** Certificates held back from this endpoint (a chain the trust store rejects, a rollout stage). */
	held?: HeldView[];
	/** sync, on a rollout's canary: what each check of each certificate in rollout found (reconcile/rollout-checks.ts). */
	rolloutChecks?: CheckResult[];
}

export interface TargetReport {
	target: string;
	kind: string;
	endpoints: EndpointReport[];
	/** When some issued certificate has none yet: those this target carries (runCycle). Absent: every one counts. */
	awaiting?: string[];
}

/** `plan` observes and plans; `sync` applies the plan too. */
export type CycleMode = "plan" | "sync";

export interface CycleReport {
	mode: CycleMode;
	startedAt: string;
	durationMs: number;
	certificates: Array<{
		name: string;
		names: string[];
		origin: string;
		serial: string;
		notBefore: string;
		notAfter: string;
		/** An operator's deliberate replacement (`certificatee replace`): never-downgrade does not hold it back. */
		replacement?: ReplacementView;
	}>;
	/** `certificate`: the certificate a file of its name is about (a held one stays desired; see certificateProblems). */
	sourceProblems: SourceProblemView[];
	/** Certificates certificatee issues: where each stands after the cycle (absent in reports built by hand). */
	renewals?: RenewalView[];
	targets: TargetReport[];
	/** The configured rollout: each certificate's stage, canaries and the rest, and what halted it. */
	rollouts?: RolloutView[];
}

export interface SourceProblemView {
	subject: string;
	certificate?: string;
	code: string;
	message: string;
	hint?: string;
}

export function viewAction(action: Action, why: string): StepView {
	const base: StepView = { op: action.op, ref: action.ref, why };
	if (action.certificate !== undefined) {
		base.certificate = action.certificate;
		if (action.bundle !== undefined) base.serial = action.bundle.leaf.serial;
	}
	if (action.crtList !== undefined) base.crtList = action.crtList;
	return base;
}

/** An endpoint report with nothing found or done yet: `ok`, unless `error` says why the endpoint was not reached. */
export function emptyEndpointReport(
	target: string,
	endpoint: string,
	error?: ErrorView,
	durationMs = 0,
): EndpointReport {
	return {
		target,
		endpoint,
		ok: error === undefined,
		...(error ? { error } : {}),
		verdicts: [],
		steps: [],
		notes: [],
		served: [],
		refs: [],
		durationMs,
	};
}

/** Where a list of steps stands: `open` ones are not done (planned, skipped or failed). */
export interface StepCounts {
	total: number;
	done: number;
	failed: number;
	skipped: number;
	open: number;
}

export function stepCounts(steps: readonly StepView[]): StepCounts {
	const count = (result: StepView["result"]) => steps.filter((s) => s.result === result).length;
	const done = count("ok");
	return {
		total: steps.length,
		done,
		failed: count("failed"),
		skipped: count("skipped"),
		open: steps.length - done,
	};
}
