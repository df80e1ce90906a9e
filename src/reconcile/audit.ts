/**
 * The audit trail, pure: one event per write and per removal a cycle did (which certificate, where, which ref,
 * the serial it replaced and the one it wrote), and one per name whose served certificate a probe saw change.
 * Serials and names only: never key material. The daemon and `sync` log each event as one line.
 */
import type { ActionOp, ObservedRef } from "./model.js";
import type { AuditEvent, ServedView, StepView } from "./report.js";

export type { AuditEvent };

const REMOVALS = new Set<ActionOp>([
	"crt-list-remove",
	"crt-list-file-remove",
	"runtime-delete",
	"storage-delete",
]);
/** Not a write of certificate content: a hook run. */
const NOT_WRITES = new Set<ActionOp>(["on-change"]);

/**
 * One event per step done. `before(ref, op)` is the serial the side the step touches held when observed, before
 * the cycle's writes.
 */
export function auditSteps(
	where: { target: string; endpoint: string },
	steps: readonly StepView[],
	before: (ref: string, op: ActionOp) => string | undefined,
): AuditEvent[] {
	const events: AuditEvent[] = [];
	for (const s of steps) {
		if (s.result !== "ok" || NOT_WRITES.has(s.op)) continue;
		const removal = REMOVALS.has(s.op);
		const oldSerial = before(s.ref, s.op);
		events.push({
			event: removal ? "removal" : "write",
			...where,
			...(s.certificate ? { certificate: s.certificate } : {}),
			ref: s.ref,
			op: s.op,
			...(s.crtList ? { crtList: s.crtList } : {}),
			...(oldSerial ? { oldSerial } : {}),
			...(!removal && s.serial ? { newSerial: s.serial } : {}),
		});
	}
	return events;
}

/** The serial an HAProxy ref's side held: storage for storage-*, else runtime (then storage). */
export function observedSerial(
	refs: readonly ObservedRef[],
): (ref: string, op: ActionOp) => string | undefined {
	const byRef = new Map(refs.map((r) => [r.ref, r]));
	return (ref, op) => {
		const r = byRef.get(ref);
		if (!r) return undefined;
		return op.startsWith("storage-") ? r.storage?.serial : (r.runtime?.serial ?? r.storage?.serial);
	};
}

/** One event per probed name whose served serial changed between the probes before and after the writes. */
export function auditServed(
	where: { target: string; endpoint: string },
	before: readonly ServedView[],
	after: readonly ServedView[],
): AuditEvent[] {
	const was = new Map(before.map((s) => [`${s.certificate} ${s.sni}`, s.servedSerial]));
	const events: AuditEvent[] = [];
	for (const s of after) {
		if (s.servedSerial === undefined) continue;
		const old = was.get(`${s.certificate} ${s.sni}`);
		if (old === s.servedSerial) continue;
		events.push({
			event: "served-change",
			...where,
			certificate: s.certificate,
			sni: s.sni,
			...(old ? { oldSerial: old } : {}),
			newSerial: s.servedSerial,
			match: s.match,
		});
	}
	return events;
}
