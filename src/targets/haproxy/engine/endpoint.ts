/**
 * One endpoint, three phases: observe everything, classify from that complete picture, then act.
 * Failures are values: an endpoint that does not answer yields a report with its error, never an exception.
 * Acting is a chain of named steps over one EndpointState: apply, probe, redo after a reload, reload.
 */
import { errorView } from "../../../errors.js";
import {
	type EndpointReport,
	emptyEndpointReport,
	type StepView,
	viewAction,
} from "../../../reconcile/report.js";
import { applySteps, workerKey } from "./apply-steps.js";
import { decide, heldView, mergeShadowed, type Plan, settleVerdicts } from "./endpoint-decide.js";
import { endpointReport, verifyCanaries } from "./endpoint-report.js";
import { type EndpointJob, type EndpointState, MAX_WRITE_PASSES } from "./endpoint-state.js";
import { observeLive } from "./liveness.js";
import { probeAll } from "./probe-step.js";
import { redoAfterReloads } from "./redo-step.js";
import { breakerGate, initialReloads, reloadStep } from "./reload-step.js";

export type { EndpointJob } from "./endpoint-state.js";

export async function processEndpoint(job: EndpointJob): Promise<EndpointReport> {
	const started = job.now().getTime();
	const before = await observeLive(job, () => probeAll(job), MAX_WRITE_PASSES);
	if (!before.ok) {
		const durationMs = job.now().getTime() - started;
		return emptyEndpointReport(job.target, job.driver.name, errorView(before.error), durationMs);
	}
	const { verdicts, plan, held } = decide(job, before.observation, before.served);
	const reloads = initialReloads(job);
	const initial: EndpointState = {
		observation: before.observation,
		verdicts: mergeShadowed(verdicts, plan, job.driver.probe !== undefined),
		served: before.served,
		steps: plan.steps.map((s) => viewAction(s.action, s.why)),
		written: [],
		pinned: new Map(),
		notes: [...plan.notes],
		...(reloads ? { reloads } : {}),
	};
	const heldSteps = held.map(({ step, hold }) => heldView(step.action, step.why, hold, job.mode));
	let state = breakerGate(job, initial, before.served);
	// A planned new file waiting for a reload counts too: an earlier cycle wrote it, this one may reload.
	const work = plan.steps.length > 0 || (job.reloads !== undefined && plan.reloadNeeds.length > 0);
	if (job.mode === "sync" && work && state.reloads?.breaker === undefined) {
		state = await act(job, plan, state);
	}
	const checks = job.mode === "sync" ? await verifyCanaries(job) : [];
	const durationMs = job.now().getTime() - started;
	return endpointReport(job, { before, plan, heldSteps, checks, state, durationMs });
}

/** sync: apply the plan, probe, redo what a reload during the writes lost, reload if allowed, settle the verdicts. */
async function act(job: EndpointJob, plan: Plan, state: EndpointState): Promise<EndpointState> {
	const queue = job.writers?.queues.queueFor({
		address: job.writers.address,
		...workerKey(state.observation),
	});
	const pinned = await applySteps(job, plan.steps, state.steps, queue);
	const written = plan.steps.map((s, i) => ({
		action: s.action,
		view: state.steps[i] as StepView,
	}));
	const applied: EndpointState = {
		...state,
		written,
		pinned,
		served: await probeAll(job),
		...(queue ? { queue } : {}),
	};
	const redone = await redoAfterReloads(job, applied);
	const reloaded = await reloadStep(job, plan.reloadNeeds, redone);
	return { ...reloaded, verdicts: settleVerdicts(reloaded.verdicts, reloaded.served, reloaded.pinned) };
}
