/** The audit trail of an HAProxy endpoint's writes (the core's auditWrites over HAProxy's ops and sides). */
import { auditWrites, type OpEffect } from "../../../reconcile/audit.js";
import type { AuditEvent, StepView } from "../../../reconcile/report.js";
import type { HaproxyAction, ObservedRef } from "./model.js";

const EFFECTS: Record<HaproxyAction["op"], OpEffect> = {
	"storage-replace": "write",
	"storage-create": "write",
	"runtime-set": "write",
	"runtime-add": "write",
	"crt-list-file-add": "write",
	"runtime-reinsert": "write",
	"crt-list-remove": "removal",
	"crt-list-file-remove": "removal",
	"runtime-delete": "removal",
	"storage-delete": "removal",
};

const effectOf = (op: string): OpEffect | undefined =>
	Object.hasOwn(EFFECTS, op) ? EFFECTS[op as HaproxyAction["op"]] : undefined;

/** One event per HAProxy step done: writes with the serial they replaced and the one they wrote, removals. */
export function auditSteps(
	where: { target: string; endpoint: string },
	steps: readonly StepView[],
	before: (ref: string, op: string) => string | undefined,
): AuditEvent[] {
	return auditWrites(where, steps, before, effectOf);
}

/** The serial an HAProxy ref's side held: storage for storage-*, else runtime (then storage). */
export function observedSerial(
	refs: readonly ObservedRef[],
): (ref: string, op: string) => string | undefined {
	const byRef = new Map(refs.map((r) => [r.ref, r]));
	return (ref, op) => {
		const r = byRef.get(ref);
		if (!r) return undefined;
		return op.startsWith("storage-") ? r.storage?.serial : (r.runtime?.serial ?? r.storage?.serial);
	};
}
