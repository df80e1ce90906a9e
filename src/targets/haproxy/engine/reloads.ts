/**
 * After a reload during the writes, what the report may claim: a step is ok exactly when the serving worker
 * (or the disk) holds its effect, whatever the old worker answered. Pure; redo-step.ts observes and redoes.
 */

import type { CertificateeError } from "../../../errors.js";
import { type StepView, viewAction } from "../../../reconcile/report.js";
import type { HaproxyAction, ObservedRef } from "./model.js";
import { sideMatches } from "./ref-content.js";

/**
 * After a worker change every applied step says what the serving worker (or the disk) holds: a write it lacks
 * is failed whatever the old worker answered; one that failed on the old worker but is held (the new worker
 * loaded the file written before) is ok.
 */
export function settleOnWorker(
	written: ReadonlyArray<{ action: HaproxyAction; view: StepView }>,
	observation: { refs: readonly ObservedRef[] },
	why: string,
): void {
	const refs = new Map(observation.refs.map((r) => [r.ref, r]));
	for (const { action, view } of written) {
		if (view.result === undefined || view.pinned !== undefined) continue;
		const held = holds(refs.get(action.ref), action);
		if (held && view.result !== "ok") {
			view.result = "ok";
			delete view.error;
			view.note = `${why}; the serving worker holds it (loaded from the file on disk)`;
		} else if (!held && view.result === "ok") {
			view.result = "failed";
			view.error = {
				code: "RUNTIME_RELOADED",
				message: `${action.op} ${action.ref}: ${why}; the serving worker lacks it`,
				hint: "written again in this cycle when a pass is left, else by the next cycle",
			};
		}
	}
}

/**
 * The worker written to died and no other answers: what a write put only in its memory is held by no process,
 * so it is not ok, whatever the worker answered. A write on disk (a file, a crt-list file edit) stays ok: it is
 * what the next start loads.
 */
export function settleOnDeadWorker(
	written: ReadonlyArray<{ action: HaproxyAction; view: StepView }>,
	gone: CertificateeError,
): void {
	for (const { action, view } of written) {
		if (view.result !== "ok" || onDisk(action)) continue;
		view.result = "failed";
		view.error = {
			code: gone.code,
			message: `${action.op} ${action.ref}: ${gone.message}; no running HAProxy holds this write`,
			...(gone.hint ? { hint: gone.hint } : {}),
		};
	}
}

function onDisk(action: HaproxyAction): boolean {
	switch (action.op) {
		case "storage-create":
		case "storage-replace":
		case "storage-delete":
		case "crt-list-file-add":
		case "crt-list-file-remove":
			return true;
		default:
			return false;
	}
}

/** Does the observed ref show the action's effect? */
export function holds(ref: ObservedRef | undefined, action: HaproxyAction): boolean {
	switch (action.op) {
		case "storage-create":
		case "storage-replace":
			return sideMatches(ref?.storage, action.bundle.leaf);
		case "runtime-set":
		case "runtime-add":
			return sideMatches(ref?.runtime, action.bundle.leaf);
		case "crt-list-remove":
			return !ref?.crtLists.includes(action.crtList);
		case "runtime-delete":
			return ref?.runtime === undefined;
		case "storage-delete":
			return ref?.storage === undefined;
		case "crt-list-file-add":
		case "crt-list-file-remove":
			// A file edit is on disk: a reload reads it, it does not undo it.
			return true;
		case "runtime-reinsert":
			// Only the order of SNI entries in the old worker; a new worker orders them from its configuration.
			return true;
	}
}

/** The view a redo reports in: the earlier step with the same op and ref (its outcome replaced), or a new one. */
export function redoView(
	written: Array<{ action: HaproxyAction; view: StepView }>,
	steps: StepView[],
	action: HaproxyAction,
	why: string,
): StepView {
	const fresh = viewAction(action, why);
	const earlier = written.findLast((w) => w.action.op === action.op && w.action.ref === action.ref);
	if (earlier === undefined) {
		steps.push(fresh);
		written.push({ action, view: fresh });
		return fresh;
	}
	earlier.action = action;
	for (const key of ["result", "error", "note", "pinned", "reloadCaused"] as const) delete earlier.view[key];
	return Object.assign(earlier.view, fresh);
}
