/**
 * What one endpoint's cycle knows, as one value: the job it was given, and the state each step (apply, probe,
 * redo after a reload, reload) takes and hands on to the next.
 */
import type { DesiredCertificate, ServedCertificate } from "../../../reconcile/model.js";
import type { HeldView, ReloadsView, ServedView, StepView } from "../../../reconcile/report.js";
import type { VerifySpec } from "../../../reconcile/rollout-view.js";
import type { DuplicatePolicy, Verdict } from "./classify.js";
import type { Observed } from "./liveness.js";
import type { EndpointDriver, HaproxyAction } from "./model.js";
import type { BreakerState, ReloadRecord } from "./reload-budget.js";
import type { WriteQueue, WriteQueues } from "./writers.js";

/** A write in flight is finished even when stopping: the signal is checked between writes only. */
export const NEVER_ABORTED = new AbortController().signal;
export const PROBE_CONCURRENCY = 8;
/** Write passes in one cycle when HAProxy keeps reloading under them; then the rest is reported failed. */
export const MAX_WRITE_PASSES = 3;

export interface EndpointJob {
	target: string;
	driver: EndpointDriver;
	/** Desired certificates for this target with their canonical ref names. */
	desired: ReadonlyArray<{ ref: string; certificate: DesiredCertificate }>;
	/** desiredKey(desired), computed once per target and cycle. */
	desiredKey?: string;
	policy: DuplicatePolicy;
	/** Directory HAProxy loads storage files from (a ref's runtime name is runtimeNameOf(dir, ref)). */
	storageDir: string;
	newCertificateCrtList?: string;
	/** See PlanInput.newCertificateDirDefault. */
	newCertificateDirDefault?: boolean;
	mode: "plan" | "sync";
	/** Duplicates an earlier cycle could not remove (ref -> why): kept and synced, removal not retried. */
	knownPinned?: ReadonlyMap<string, string>;
	/** Every write goes through the queue of the HAProxy process it reaches, shared by all targets. */
	writers?: { queues: WriteQueues; address: string };
	/** The target's reload budget and this endpoint's remembered reloads and breaker (docs/reloads.md). */
	reloads?: { maxPerHour: number; history: readonly ReloadRecord[]; breaker?: BreakerState };
	/**
	 * Certificates not written to this endpoint this cycle, and why: a chain the target's trust store rejects, or
	 * a rollout stage that has not reached the endpoint (reconcile/rollout.ts). Their steps are planned and shown,
	 * never applied.
	 */
	holds?: ReadonlyMap<string, HeldView>;
	/** sync, on a rollout's canary: the certificates to verify by what the endpoint serves after the writes. */
	verify?: ReadonlyMap<string, VerifySpec>;
	signal: AbortSignal;
	now: () => Date;
}

/** What the probe found for each name: the report's view, and the certificate served when one answered. */
export type Probed = Array<{ view: ServedView; served?: ServedCertificate }>;

/** A step applied this cycle and the view the report shows it in. */
export interface Written {
	action: HaproxyAction;
	view: StepView;
}

/**
 * One endpoint after a step of its cycle. The step views are the report's own: a step fills in its result in
 * place, as it runs; everything else a step changes, it hands on in a new state.
 */
export interface EndpointState {
	observation: Observed;
	verdicts: Verdict[];
	served: Probed;
	/** The report's step views, in order: the plan's, then those a redo after a reload added. */
	steps: StepView[];
	/** The steps applied, with their views (a redo replaces the outcome of the write it repeats). */
	written: Written[];
	/** Refs whose removal the configuration refused this cycle (ref -> why). */
	pinned: ReadonlyMap<string, string>;
	notes: string[];
	/** The reload budget, the breaker and this cycle's reload decision, when the target reloads. */
	reloads?: ReloadsView;
	/** The write queue of the HAProxy process the writes reach. */
	queue?: WriteQueue;
}
