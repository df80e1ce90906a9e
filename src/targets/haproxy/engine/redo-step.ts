/**
 * A reload during the writes: the new worker loaded the files as they were when it started, and every runtime
 * write that reached the old worker after that is lost. A write is ok only when the worker that serves holds
 * it: observe again and, while the worker changed, settle every step on what the new worker holds, then write
 * what it lacks (bounded passes). A redone step replaces the report of the lost one.
 */
import { applySteps } from "./apply-steps.js";
import { decide } from "./endpoint-decide.js";
import { type EndpointJob, type EndpointState, MAX_WRITE_PASSES } from "./endpoint-state.js";
import { workerChange, workerGone } from "./liveness.js";
import { probeAll } from "./probe-step.js";
import { redoView, settleOnDeadWorker, settleOnWorker } from "./reloads.js";

export async function redoAfterReloads(
	job: EndpointJob,
	before: EndpointState,
	cause = "HAProxy reloaded during the writes",
): Promise<EndpointState> {
	const state: EndpointState = {
		...before,
		steps: [...before.steps],
		written: [...before.written],
		pinned: new Map(before.pinned),
		notes: [...before.notes],
	};
	const note = (text: string): EndpointState => ({ ...state, notes: [...state.notes, text] });
	for (let pass = 2; ; pass++) {
		if (job.signal.aborted) return note("stopping: the writes were not checked against the serving worker");
		const reloaded = await workerChange(job, state.observation);
		if (reloaded === undefined) return state;
		if (!reloaded.again.ok) {
			// Mid-reload the socket may refuse for a moment: look again, within the same bound.
			if (pass <= MAX_WRITE_PASSES) continue;
			// No worker answers: what memory-only writes put in the one that died is held by no process.
			const gone = workerGone(job, reloaded.from, reloaded.again.error, "after the writes");
			settleOnDeadWorker(state.written, gone);
			return note(gone.message);
		}
		const why = `${cause} (worker ${reloaded.from} -> ${reloaded.to})`;
		state.observation = reloaded.again;
		settleOnWorker(state.written, state.observation, why);
		state.served = await probeAll(job);
		const decided = decide(job, state.observation, state.served);
		state.verdicts = decided.verdicts;
		if (pass > MAX_WRITE_PASSES) {
			return note(`${why}, during each of ${MAX_WRITE_PASSES} write passes; the next cycle retries`);
		}
		if (decided.plan.steps.length === 0) return state;
		const redo = decided.plan.steps.map((s) => ({
			...s,
			why: `${s.why}; redo, pass ${pass}: ${why} and the new worker lacks it`,
		}));
		const views = redo.map((s) => redoView(state.written, state.steps, s.action, s.why));
		const pinned = await applySteps(job, redo, views, state.queue);
		state.pinned = new Map([...state.pinned, ...pinned]);
		state.served = await probeAll(job);
	}
}
