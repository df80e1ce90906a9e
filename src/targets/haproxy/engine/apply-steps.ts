/**
 * Phase 3 of an endpoint: the writes in order, one at a time, or in the groups its driver batches (batches.ts),
 * through the write queue of the HAProxy process they reach.
 */
import { CertificateeError, errorView } from "../../../errors.js";
import type { ActionResult } from "../../../reconcile/model.js";
import type { StepView } from "../../../reconcile/report.js";
import { batchGroups } from "./batches.js";
import { type EndpointJob, NEVER_ABORTED } from "./endpoint-state.js";
import type { Observed } from "./liveness.js";
import type { HaproxyAction } from "./model.js";
import { type WorkerIdentity, type WriteQueue, workerFromInfo } from "./writers.js";

/** What the writes so far say about the refs still to write. */
interface Progress {
	failedRefs: Set<string>;
	pinnedRefs: Map<string, string>;
	/** Refs whose file this cycle wrote: when stopping, their runtime write still runs (storage never stays ahead). */
	stored: Set<string>;
}

/**
 * A ref whose write failed, or whose removal the configuration refused (pinned), gets no further writes this
 * cycle. Fills in each step's result; returns the refs found pinned (ref -> why).
 */
export async function applySteps(
	job: EndpointJob,
	planned: ReadonlyArray<{ action: HaproxyAction }>,
	views: StepView[],
	queue: WriteQueue | undefined,
): Promise<Map<string, string>> {
	const progress: Progress = { failedRefs: new Set(), pinnedRefs: new Map(), stored: new Set() };
	const { driver } = job;
	for (const group of batchGroups(planned, driver.applyBatch ? driver.batches : undefined)) {
		const runnable = group.filter((i) =>
			mayRun(job, (planned[i] as { action: HaproxyAction }).action, views[i] as StepView, progress),
		);
		if (runnable.length === 0) continue;
		const actions = runnable.map((i) => (planned[i] as { action: HaproxyAction }).action);
		const results = await applyStep(job, actions, queue);
		for (const [n, i] of runnable.entries()) {
			const action = actions[n] as HaproxyAction;
			recordResult(views[i] as StepView, action, results[n], progress.failedRefs, progress.pinnedRefs);
			if (isStorageWrite(action) && results[n]?.ok) progress.stored.add(action.ref);
		}
	}
	return progress.pinnedRefs;
}

/** Whether a step runs now; one that does not is reported skipped, with why. */
function mayRun(job: EndpointJob, action: HaproxyAction, view: StepView, progress: Progress): boolean {
	const pinned = progress.pinnedRefs.get(action.ref);
	const go = !job.signal.aborted || completesPair(action, progress.stored);
	if (!progress.failedRefs.has(action.ref) && pinned === undefined && go) return true;
	view.result = "skipped";
	if (job.signal.aborted) view.note = "stopping";
	else if (pinned !== undefined) Object.assign(view, { pinned, note: `pinned: ${pinned}` });
	else view.note = "an earlier write for this ref failed";
	return false;
}

/** One write, or one batch of them, through the queue; a write in flight is finished even when stopping. */
function applyStep(
	job: EndpointJob,
	actions: readonly HaproxyAction[],
	queue: WriteQueue | undefined,
): Promise<ActionResult[]> {
	const { driver } = job;
	const write = (): Promise<ActionResult[]> =>
		actions.length > 1 && driver.applyBatch
			? driver.applyBatch(actions, NEVER_ABORTED)
			: driver.apply(actions[0] as HaproxyAction, NEVER_ABORTED).then((r) => [r]);
	return queue ? queue.run(write) : write();
}

export const isStorageWrite = (a: HaproxyAction) => a.op === "storage-create" || a.op === "storage-replace";

/**
 * The runtime half of a storage write done this cycle: it runs even when stopping, so a SIGTERM never leaves a
 * file on disk that HAProxy does not serve (a reload would change what is served).
 */
export function completesPair(action: HaproxyAction, stored: ReadonlySet<string>): boolean {
	return (action.op === "runtime-set" || action.op === "runtime-add") && stored.has(action.ref);
}

/** One step's result into its view; a failed ref, or a refusal by the configuration (pinned), is remembered. */
export function recordResult(
	view: StepView,
	action: HaproxyAction,
	result: ActionResult | undefined,
	failedRefs: Set<string>,
	pinnedRefs: Map<string, string>,
): void {
	const r: ActionResult = result ?? {
		action,
		ok: false,
		error: new CertificateeError("ENDPOINT_ERROR", "the driver reported no result for this write"),
	};
	view.result = r.ok ? "ok" : "failed";
	if (r.note) view.note = r.note;
	if (r.reloadCaused) view.reloadCaused = r.reloadCaused;
	if (r.reloadNeeded) view.reloadNeeded = r.reloadNeeded;
	const refusal = r.error ? pinnedBy(action, r.error) : undefined;
	if (refusal !== undefined) {
		// Refused by the configuration, not failed: reported as pinned, kept and synced from the next cycle.
		view.result = "skipped";
		view.pinned = refusal;
		view.note = `pinned: ${refusal}`;
		pinnedRefs.set(action.ref, refusal);
	} else if (r.error) {
		view.error = errorView(r.error);
		failedRefs.add(action.ref);
	}
}

/**
 * A duplicate's removal refused because haproxy.cfg references it: the Data Plane API's 409 on the storage
 * delete, or HAProxy's "in use" on the runtime delete once its crt-list entries are gone (a direct crt line).
 */
export function pinnedBy(action: HaproxyAction, error: CertificateeError): string | undefined {
	if (action.op === "storage-delete" && error.code === "ENDPOINT_CONFLICT") {
		return "the Data Plane API refuses to delete the file (409): haproxy.cfg references it; it can only go with a config change and reload";
	}
	if (action.op === "runtime-delete" && error.code === "RUNTIME_CERT_IN_USE") {
		return "HAProxy keeps it in use after its crt-list entries were removed: a crt line in haproxy.cfg references it; it can only go with a config change and reload";
	}
	return undefined;
}

/** The write queue is per HAProxy process: the worker observed names it. */
export function workerKey(observation: Observed): { worker?: WorkerIdentity } {
	const worker = workerFromInfo(observation.info, observation.observedAt);
	return worker ? { worker } : {};
}
