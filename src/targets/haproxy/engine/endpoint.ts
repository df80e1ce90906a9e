/**
 * One endpoint, three phases: observe everything, classify from that complete picture, then act.
 * Failures are values: an endpoint that does not answer yields a report with its error, never an exception.
 */
import pLimit from "p-limit";
import { CertificateeError, describeError, errorView } from "../../../errors.js";
import { handshakeRefused } from "../../../probe/index.js";
import { auditServed } from "../../../reconcile/audit.js";
import type { ActionResult, DesiredCertificate, ServedCertificate } from "../../../reconcile/model.js";
import {
	type EndpointReport,
	emptyEndpointReport,
	type HeldView,
	type ReloadsView,
	type ServedView,
	type StepView,
	viewAction,
} from "../../../reconcile/report.js";
import { verifyCanary } from "../../../reconcile/rollout-checks.js";
import type { CheckResult, VerifySpec } from "../../../reconcile/rollout-view.js";
import { auditSteps, observedSerial } from "./audit.js";
import { batchGroups } from "./batches.js";
import { classifyEndpoint, type DuplicatePolicy, type Side, type Verdict } from "./classify.js";
import { type Observed, observeLive, workerChange, workerGone } from "./liveness.js";
import { type EndpointDriver, type HaproxyAction, runtimeNameOf } from "./model.js";
import { planEndpoint } from "./plan.js";
import { sideMatches } from "./ref-content.js";
import {
	type BreakerState,
	breakerCloses,
	budgetView,
	decideReload,
	describeNeeds,
	pruneHistory,
	type ReloadNeed,
	type ReloadRecord,
} from "./reload-budget.js";
import { redoView, settleOnDeadWorker, settleOnWorker } from "./reloads.js";
import { type WorkerIdentity, type WriteQueue, type WriteQueues, workerFromInfo } from "./writers.js";

const NEVER_ABORTED = new AbortController().signal;
const PROBE_CONCURRENCY = 8;
/** Write passes in one cycle when HAProxy keeps reloading under them; then the rest is reported failed. */
export const MAX_WRITE_PASSES = 3;

export interface EndpointJob {
	target: string;
	driver: EndpointDriver;
	/** Desired certificates for this target with their canonical ref names. */
	desired: ReadonlyArray<{ ref: string; certificate: DesiredCertificate }>;
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

type Probed = Array<{ view: ServedView; served?: ServedCertificate }>;

export async function processEndpoint(job: EndpointJob): Promise<EndpointReport> {
	const started = job.now().getTime();
	const base = { target: job.target, endpoint: job.driver.name };
	const looked = await observeLive(job, () => probeAll(job), MAX_WRITE_PASSES);
	if (!looked.ok) {
		const durationMs = job.now().getTime() - started;
		return emptyEndpointReport(job.target, job.driver.name, errorView(looked.error), durationMs);
	}
	let { observation, served: servedBefore } = looked;
	const serialBefore = observedSerial(observation.refs);
	let { verdicts, plan, held } = decide(job, observation, servedBefore);
	// Names this cycle's writes hand to another ref, reported before the write (cleared below if served right);
	// where no probe shows who serves a name, the plan's handover says more than the observation.
	const handedOver = new Set(plan.shadowed.map((p) => p.sni));
	const probed = job.driver.probe !== undefined;
	const classified = verdicts.filter((v) => v.class !== "shadowed" || probed || !handedOver.has(v.sni));
	verdicts = [
		...classified,
		...plan.shadowed.filter((p) => !classified.some((v) => v.class === "shadowed" && v.sni === p.sni)),
	];
	const steps: StepView[] = plan.steps.map((s) => viewAction(s.action, s.why));
	const heldSteps = held.map(({ step, hold }) => heldView(step.action, step.why, hold, job.mode));
	const notes = [...plan.notes];
	let served = servedBefore;
	const reloads = job.reloads;
	let reloadsView: ReloadsView | undefined = reloads && {
		budget: budgetView(reloads.maxPerHour, reloads.history, job.now()),
		recent: pruneHistory(reloads.history, job.now()),
		...(reloads.breaker ? { breaker: reloads.breaker } : {}),
	};
	if (job.mode === "sync" && reloadsView?.breaker !== undefined) {
		if (breakerCloses(servedBefore.map((s) => s.view))) {
			notes.push(
				`reload breaker closed: every probed name serves what was written (open since ${reloadsView.breaker.openedAt})`,
			);
			delete reloadsView.breaker;
		} else {
			// Open: nothing is written to this node until it serves what was written, or an operator clears it.
			for (const view of steps) {
				view.result = "skipped";
				view.note = "reload breaker open: no writes to this endpoint";
			}
		}
	}
	// A planned new file waiting for a reload counts too: an earlier cycle wrote it, this one may reload.
	const work = plan.steps.length > 0 || (reloads !== undefined && plan.reloadNeeds.length > 0);
	if (job.mode === "sync" && work && reloadsView?.breaker === undefined) {
		const queue = job.writers?.queues.queueFor({
			address: job.writers.address,
			...workerKey(observation),
		});
		const pinnedRefs = await applySteps(job, plan.steps, steps, queue);
		served = await probeAll(job);
		const written = plan.steps.map((s, i) => ({ action: s.action, view: steps[i] as StepView }));
		const after = await redoAfterReloads(
			job,
			{ observation, verdicts, served },
			written,
			steps,
			queue,
			pinnedRefs,
		);
		({ observation, verdicts, served } = after);
		notes.push(...after.notes);
		if (reloads && reloadsView) {
			const reloaded = await reloadIfAllowed(job, reloads, reloadsView, {
				plan,
				written,
				steps,
				queue,
				pinnedRefs,
				state: { observation, verdicts, served },
			});
			({ observation, verdicts, served } = reloaded.state);
			notes.splice(0, notes.length, ...reloaded.notes(notes));
			reloadsView = reloaded.view;
		}
		// A name the writes fixed is no longer shadowed; the report shows what is served now.
		const fixed = new Set(served.filter((s) => s.view.match).map((s) => s.view.sni));
		verdicts = verdicts
			.filter((v) => v.class !== "shadowed" || !fixed.has(v.sni))
			.map((v) => asPinned(v, pinnedRefs));
	}
	const checks = job.mode === "sync" ? await verifyCanaries(job) : [];
	const classByRef = new Map<string, (typeof verdicts)[number]["class"]>();
	for (const v of verdicts) if ("ref" in v) classByRef.set(v.ref, v.class);
	const audit =
		job.mode === "sync"
			? [
					...auditSteps(base, steps, serialBefore),
					...auditServed(
						base,
						servedBefore.map((s) => s.view),
						served.map((s) => s.view),
					),
				]
			: [];
	return {
		...base,
		ok: true,
		verdicts,
		steps: [...steps, ...heldSteps],
		notes,
		...heldReport(job, heldSteps, checks),
		...(checks.length > 0 ? { rolloutChecks: checks } : {}),
		...(audit.length > 0 ? { audit } : {}),
		...(plan.servingAfter.length > 0 ? { servingAfter: plan.servingAfter } : {}),
		...crtListProblems(observation),
		...(reloadsView ? { reloads: reloadsView } : {}),
		served: served.map((s) => s.view),
		refs: observation.refs.map((r) => {
			const notAfter = r.runtime?.notAfter ?? r.storage?.notAfter;
			return {
				ref: r.ref,
				class: classByRef.get(r.ref) ?? "unmanaged",
				...(notAfter ? { notAfter: notAfter.toISOString() } : {}),
			};
		}),
		durationMs: job.now().getTime() - started,
	};
}

/**
 * A reload during the writes: the new worker loaded the files as they were when it started, and every runtime
 * write that reached the old worker after that is lost. A write is ok only when the worker that serves holds
 * it: observe again and, while the worker changed, settle every step on what the new worker holds, then write
 * what it lacks (bounded passes). A redone step replaces the report of the lost one.
 */
async function redoAfterReloads(
	job: EndpointJob,
	state: { observation: Observed; verdicts: Verdict[]; served: Probed },
	written: Array<{ action: HaproxyAction; view: StepView }>,
	steps: StepView[],
	queue: WriteQueue | undefined,
	pinnedRefs: Map<string, string>,
	cause = "HAProxy reloaded during the writes",
): Promise<{ observation: Observed; verdicts: Verdict[]; served: Probed; notes: string[] }> {
	let { observation, verdicts, served } = state;
	const notes: string[] = [];
	for (let pass = 2; ; pass++) {
		if (job.signal.aborted) {
			notes.push("stopping: the writes were not checked against the serving worker");
			break;
		}
		const reloaded = await workerChange(job, observation);
		if (reloaded === undefined) break;
		if (!reloaded.again.ok) {
			// Mid-reload the socket may refuse for a moment: look again, within the same bound.
			if (pass <= MAX_WRITE_PASSES) continue;
			// No worker answers: what memory-only writes put in the one that died is held by no process.
			const gone = workerGone(job, reloaded.from, reloaded.again.error, "after the writes");
			settleOnDeadWorker(written, gone);
			notes.push(gone.message);
			break;
		}
		const why = `${cause} (worker ${reloaded.from} -> ${reloaded.to})`;
		observation = reloaded.again;
		settleOnWorker(written, observation, why);
		served = await probeAll(job);
		const decided = decide(job, observation, served);
		verdicts = decided.verdicts;
		if (pass > MAX_WRITE_PASSES) {
			notes.push(`${why}, during each of ${MAX_WRITE_PASSES} write passes; the next cycle retries`);
			break;
		}
		if (decided.plan.steps.length === 0) break;
		const redo = decided.plan.steps.map((s) => ({
			...s,
			why: `${s.why}; redo, pass ${pass}: ${why} and the new worker lacks it`,
		}));
		const views = redo.map((s) => redoView(written, steps, s.action, s.why));
		for (const [ref, refusal] of await applySteps(job, redo, views, queue)) pinnedRefs.set(ref, refusal);
		served = await probeAll(job);
	}
	return { observation, verdicts, served, notes };
}

/**
 * Phase 3: the endpoint's writes in order, one at a time, or in the groups its driver batches (batches.ts). A
 * ref whose write failed, or whose removal the configuration refused (pinned), gets no further writes this
 * cycle. Fills in each step's result; returns the refs found pinned (ref -> why).
 */
async function applySteps(
	job: EndpointJob,
	planned: ReadonlyArray<{ action: HaproxyAction }>,
	views: StepView[],
	queue: WriteQueue | undefined,
): Promise<Map<string, string>> {
	const failedRefs = new Set<string>();
	const pinnedRefs = new Map<string, string>();
	// Refs whose file this cycle wrote: when stopping, their runtime write still runs (storage never stays ahead).
	const stored = new Set<string>();
	const { driver } = job;
	for (const group of batchGroups(planned, driver.applyBatch ? driver.batches : undefined)) {
		const runnable = group.filter((i) => {
			const step = planned[i] as { action: HaproxyAction };
			const view = views[i] as StepView;
			const pinned = pinnedRefs.get(step.action.ref);
			const go = !job.signal.aborted || completesPair(step.action, stored);
			if (!failedRefs.has(step.action.ref) && pinned === undefined && go) return true;
			view.result = "skipped";
			if (job.signal.aborted) view.note = "stopping";
			else if (pinned !== undefined) Object.assign(view, { pinned, note: `pinned: ${pinned}` });
			else view.note = "an earlier write for this ref failed";
			return false;
		});
		if (runnable.length === 0) continue;
		const actions = runnable.map((i) => (planned[i] as { action: HaproxyAction }).action);
		// A write in flight is finished even when stopping: the signal is checked between writes only.
		const write = (): Promise<ActionResult[]> =>
			actions.length > 1 && driver.applyBatch
				? driver.applyBatch(actions, NEVER_ABORTED)
				: driver.apply(actions[0] as HaproxyAction, NEVER_ABORTED).then((r) => [r]);
		const results = await (queue ? queue.run(write) : write());
		for (const [n, i] of runnable.entries()) {
			const action = actions[n] as HaproxyAction;
			recordResult(views[i] as StepView, action, results[n], failedRefs, pinnedRefs);
			if (isStorageWrite(action) && results[n]?.ok) stored.add(action.ref);
		}
	}
	return pinnedRefs;
}

const isStorageWrite = (a: HaproxyAction) => a.op === "storage-create" || a.op === "storage-replace";

/**
 * The runtime half of a storage write done this cycle: it runs even when stopping, so a SIGTERM never leaves a
 * file on disk that HAProxy does not serve (a reload would change what is served).
 */
function completesPair(action: HaproxyAction, stored: ReadonlySet<string>): boolean {
	return (action.op === "runtime-set" || action.op === "runtime-add") && stored.has(action.ref);
}

/** One step's result into its view; a failed ref, or a refusal by the configuration (pinned), is remembered. */
function recordResult(
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

/** The crt-list lines the observation found naming missing files (reported as failures: see report.ts). */
function crtListProblems(observation: Observed): { crtListProblems?: EndpointReport["crtListProblems"] } {
	const problems = (observation.crtLists ?? []).flatMap((l) =>
		(l.unresolved ?? []).map((u) => ({ crtList: l.name, line: u.line, file: u.file })),
	);
	return problems.length > 0 ? { crtListProblems: problems } : {};
}

/** Phase 2: classify the complete picture, then plan. Pure. */
function decide(
	job: EndpointJob,
	observation: Observed,
	probed: ReadonlyArray<{ served?: ServedCertificate }>,
): { verdicts: Verdict[]; plan: ReturnType<typeof planEndpoint>; held: HeldStep[] } {
	const served = probed.flatMap((s) => (s.served ? [s.served] : []));
	const verdicts = classifyEndpoint({
		desired: job.desired,
		refs: observation.refs,
		policy: job.policy,
		served,
		...(job.driver.probe === undefined ? { unprobed: true } : {}),
		...(job.knownPinned ? { knownPinned: job.knownPinned } : {}),
		...(observation.crtLists ? { crtLists: observation.crtLists } : {}),
	});
	const plan = planEndpoint({
		verdicts,
		desired: new Map(job.desired.map((d) => [d.certificate.name, d.certificate])),
		refs: new Map(observation.refs.map((r) => [r.ref, r])),
		runtimeNameFor: (ref) => runtimeNameOf(job.storageDir, ref),
		...(job.newCertificateCrtList ? { newCertificateCrtList: job.newCertificateCrtList } : {}),
		...(job.newCertificateDirDefault ? { newCertificateDirDefault: true } : {}),
		legacyDuplicates: job.policy.legacyDuplicates,
		...(observation.crtLists ? { crtLists: new Map(observation.crtLists.map((l) => [l.name, l])) } : {}),
		served,
		reinserts: job.driver.reinserts === true,
	});
	return { verdicts, ...withoutHeld(plan, job.holds) };
}

type Plan = ReturnType<typeof planEndpoint>;
type HeldStep = { step: Plan["steps"][number]; hold: HeldView };

/** The plan without the steps of held certificates (nor the reloads they would need), and those steps apart. */
function withoutHeld(
	plan: Plan,
	holds: ReadonlyMap<string, HeldView> | undefined,
): { plan: Plan; held: HeldStep[] } {
	if (holds === undefined || holds.size === 0) return { plan, held: [] };
	const holdOf = (certificate: string | undefined) =>
		certificate === undefined ? undefined : holds.get(certificate);
	const held: HeldStep[] = [];
	const steps = plan.steps.filter((step) => {
		const hold = holdOf("certificate" in step.action ? step.action.certificate : undefined);
		if (hold) held.push({ step, hold });
		return hold === undefined;
	});
	const reloadNeeds = plan.reloadNeeds.filter((n) => holdOf(n.certificate) === undefined);
	return { plan: { ...plan, steps, reloadNeeds }, held };
}

/** A held step as the report shows it: skipped in sync, planned (no result) in plan, with the hold's reason. */
function heldView(action: HaproxyAction, why: string, hold: HeldView, mode: EndpointJob["mode"]): StepView {
	const view = viewAction(action, why);
	if (mode === "sync") view.result = "skipped";
	view.note = `${hold.code}: ${hold.message}`;
	return view;
}

/** The holds the report carries: a trust failure always (a chain that does not verify is wrong wherever it is), a
 * rollout's only where it held a write back. */
function heldReport(
	job: EndpointJob,
	heldSteps: readonly StepView[],
	checks: readonly CheckResult[],
): { held?: HeldView[] } {
	const carried = new Set(job.desired.map((d) => d.certificate.name));
	const withSteps = new Set(heldSteps.map((s) => s.certificate));
	const held = [...(job.holds?.values() ?? [])].filter(
		(h) => carried.has(h.certificate) && (h.failed || withSteps.has(h.certificate)),
	);
	// A canary whose check failed: the rollout halts here, a failure of this endpoint naming the check.
	const reported = new Set<string>();
	for (const c of checks) {
		if (c.ok || reported.has(c.certificate)) continue;
		reported.add(c.certificate);
		held.push({
			certificate: c.certificate,
			kind: "rollout",
			code: c.code ?? "ROLLOUT_CHECK_FAILED",
			message: `rollout halted: the ${c.check} check failed on this canary: ${c.message ?? ""}; the other endpoints keep the certificate they serve`,
			...(c.hint ? { hint: c.hint } : {}),
			failed: true,
		});
	}
	return held.length > 0 ? { held } : {};
}

/** The rollout's checks of each certificate this canary verifies, once its writes are done. */
async function verifyCanaries(job: EndpointJob): Promise<CheckResult[]> {
	if (job.verify === undefined || job.verify.size === 0 || job.signal.aborted) return [];
	const desired = job.desired.map((d) => d.certificate);
	const probe = job.driver.probe?.bind(job.driver);
	const out: CheckResult[] = [];
	for (const [name, spec] of job.verify) {
		const certificate = desired.find((d) => d.name === name);
		if (certificate === undefined || job.holds?.has(name)) continue;
		out.push(
			...(await verifyCanary({
				endpoint: `${job.target}/${job.driver.name}`,
				certificate,
				desired,
				spec,
				probe,
				signal: job.signal,
				now: job.now(),
			})),
		);
	}
	return out;
}

function workerKey(observation: Observed): { worker?: WorkerIdentity } {
	const worker = workerFromInfo(observation.info, observation.observedAt);
	return worker ? { worker } : {};
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

/** A duplicate whose removal the configuration refused becomes a pinned verdict. */
function asPinned(v: Verdict, pinned: ReadonlyMap<string, string>): Verdict {
	if (v.class !== "legacy-duplicate" && v.class !== "deleted-pending-reload") return v;
	const why = pinned.get(v.ref);
	if (why === undefined) return v;
	const staleSides: Side[] =
		v.class === "legacy-duplicate" ? v.staleSides : v.runtimeStale ? ["runtime"] : [];
	return { class: "pinned", ref: v.ref, certificate: v.certificate, keeper: v.keeper, staleSides, why };
}

/**
 * Probes every DNS name (not wildcards) of every desired certificate, and every IP address without SNI (what a
 * client reaching the IP gets: the bind's default certificate), as a client of its key type, a few at a time.
 */
async function probeAll(job: EndpointJob): Promise<Probed> {
	const probe = job.driver.probe?.bind(job.driver);
	if (probe === undefined) return [];
	const limit = pLimit(PROBE_CONCURRENCY);
	const names = job.desired.flatMap(({ certificate }) =>
		[
			...certificate.bundle.leaf.dnsNames.filter((sni) => !sni.startsWith("*.")),
			...certificate.bundle.leaf.ipAddresses,
		].map((sni) => ({ sni, certificate })),
	);
	return Promise.all(
		names.map(({ sni, certificate }) =>
			limit(async (): Promise<{ view: ServedView; served?: ServedCertificate }> => {
				const expectedSerial = certificate.bundle.leaf.serial;
				try {
					const keyType = certificate.bundle.leaf.keyType;
					const served = await probe(
						sni,
						job.signal,
						keyType === "rsa" || keyType === "ec" ? keyType : undefined,
					);
					return {
						served,
						view: {
							sni,
							certificate: certificate.name,
							expectedSerial,
							servedSerial: served.serial,
							match: served.serial === expectedSerial,
						},
					};
				} catch (e) {
					return {
						view: {
							sni,
							certificate: certificate.name,
							expectedSerial,
							match: false,
							error: describeError(e),
							...(handshakeRefused(e) ? { noCertificate: true as const } : {}),
						},
					};
				}
			}),
		),
	);
}

interface Applied {
	plan: ReturnType<typeof planEndpoint>;
	written: Array<{ action: HaproxyAction; view: StepView }>;
	steps: StepView[];
	queue: WriteQueue | undefined;
	pinnedRefs: Map<string, string>;
	state: { observation: Observed; verdicts: Verdict[]; served: Probed };
}

/** What only a reload makes live after this cycle's writes: planned new files, and writes the driver could not hot-swap. */
export function reloadNeedsOf(planned: readonly ReloadNeed[], steps: readonly StepView[]): ReloadNeed[] {
	const storageOk = (ref: string) =>
		steps.every((s) => s.ref !== ref || !s.op.startsWith("storage-") || s.result === "ok");
	return [
		...planned.filter((n) => storageOk(n.ref)),
		...steps.flatMap((s) =>
			s.reloadNeeded && storageOk(s.ref)
				? [{ ref: s.ref, ...(s.certificate ? { certificate: s.certificate } : {}), reason: s.reloadNeeded }]
				: [],
		),
	];
}

/**
 * After every write of the cycle: one reload at most, when something written is live only after one and the
 * budget and the breaker allow it; then every changed name is probed. A reload that fails, or after which the
 * node does not serve what was written, opens the breaker.
 */
async function reloadIfAllowed(
	job: EndpointJob,
	reloads: NonNullable<EndpointJob["reloads"]>,
	view: ReloadsView,
	applied: Applied,
): Promise<{ state: Applied["state"]; view: ReloadsView; notes: (notes: string[]) => string[] }> {
	const { steps } = applied;
	const needs = reloadNeedsOf(applied.plan.reloadNeeds, steps);
	const unchanged = { state: applied.state, view, notes: (n: string[]) => n };
	const writesDurable = steps.every((s) => !s.op.startsWith("storage-") || s.result === "ok");
	const decision = decideReload({
		now: job.now(),
		maxPerHour: reloads.maxPerHour,
		history: reloads.history,
		...(reloads.breaker && view.breaker ? { breaker: reloads.breaker } : {}),
		needs,
		writesDurable,
	});
	if (decision.action === "none") return unchanged;
	const certificates = [...new Set(needs.flatMap((n) => (n.certificate ? [n.certificate] : [])))];
	if (decision.action === "hold" || job.driver.reload === undefined || job.signal.aborted) {
		const code = decision.action === "hold" ? decision.code : "RELOAD_DISABLED";
		const message =
			decision.action === "hold"
				? decision.message
				: `pending a reload (${describeNeeds(needs)}): ${job.signal.aborted ? "stopping" : "this target cannot reload"}`;
		for (const s of steps) if (s.reloadNeeded) s.note = `${s.note ? `${s.note}; ` : ""}${code}: ${message}`;
		return {
			...unchanged,
			view: { ...view, cycle: { decision: "held", reasons: decision.reasons, certificates, code, message } },
		};
	}
	const at = job.now();
	const why = `certificatee reloaded HAProxy (${describeNeeds(needs)})`;
	const written = needs.flatMap((n) => {
		const d = job.desired.find((x) => x.ref === n.ref);
		return d ? [{ ref: n.ref, bundle: d.certificate.bundle }] : [];
	});
	const run = () => (job.driver.reload as NonNullable<EndpointDriver["reload"]>)(NEVER_ABORTED, written);
	const outcome = await (applied.queue ? applied.queue.run(run) : run());
	let state = applied.state;
	const extraNotes: string[] = [];
	let result: ReloadRecord["result"] = "failed";
	let message: string;
	if (!outcome.ok) {
		message = `${outcome.error.code}: ${outcome.error.message}`;
	} else {
		// The new worker loaded the disk: settle every step on what it holds, and redo what only memory had.
		const after = await redoAfterReloads(
			job,
			state,
			applied.written,
			steps,
			applied.queue,
			applied.pinnedRefs,
			"certificatee reloaded HAProxy",
		);
		state = { observation: after.observation, verdicts: after.verdicts, served: after.served };
		extraNotes.push(...after.notes);
		const changed = new Set(needs.flatMap((n) => (n.certificate ? [n.certificate] : [])));
		const probed = state.served.filter((s) => changed.has(s.view.certificate)).map((s) => s.view);
		const refs = new Map(state.observation.refs.map((r) => [r.ref, r]));
		const held = needs.every((n) => {
			const want = job.desired.find((d) => d.ref === n.ref)?.certificate.bundle.leaf;
			return want !== undefined && sideMatches(refs.get(n.ref)?.runtime, want);
		});
		const serves = probed.length > 0 ? breakerCloses(probed) : held;
		result = serves ? "ok" : "not-served";
		message = serves
			? `${outcome.detail}; every changed name serves what was written`
			: `${outcome.detail}; but ${
					probed
						.filter((p) => !p.match)
						.map((p) => `${p.sni} serves ${p.servedSerial ?? p.error ?? "?"}`)[0] ??
					"the new worker does not hold what was written"
				}`;
	}
	const record: ReloadRecord = { at: at.toISOString(), reasons: decision.reasons, result };
	const next: ReloadsView = {
		budget: budgetView(reloads.maxPerHour, [...reloads.history, record], job.now()),
		recent: pruneHistory([...reloads.history, record], job.now()),
		cycle: {
			decision: "reloaded",
			reasons: decision.reasons,
			certificates,
			message: `${why}: ${message}`,
			result,
		},
	};
	if (result !== "ok") {
		next.breaker = { openedAt: at.toISOString(), code: "RELOAD_FAILED", message: `${why}: ${message}` };
	}
	const servedNotes = new Set(result === "ok" ? needs.flatMap((n) => n.note ?? []) : []);
	return {
		state,
		view: next,
		notes: (notes) => [
			// A new file the reload made live is no longer waiting for one.
			...notes.filter((n) => !servedNotes.has(n)),
			...extraNotes,
		],
	};
}
