/**
 * The audit trail, pure: one event per write and per removal a cycle did (which certificate, where, which ref,
 * the serial it replaced and the one it wrote), and one per name whose served certificate a probe saw change.
 * Serials and names only: never key material. The daemon and `sync` log each event as one line.
 */
import type { AuditEvent, ServedView, StepView } from "./report.js";

export type { AuditEvent };

/**
 * What a done step of a kind's op is in the audit trail: a write of certificate content, a removal, or `none`
 * (a hook run). Each kind declares it for every op of its Action union.
 */
export type OpEffect = "write" | "removal" | "none";

/**
 * One event per step done. `before(ref, op)` is the serial the side the step touches held when observed, before
 * the cycle's writes; `effectOf` is the kind's table (an op it does not list is no event).
 */
export function auditWrites(
	where: { target: string; endpoint: string },
	steps: readonly StepView[],
	before: (ref: string, op: string) => string | undefined,
	effectOf: (op: string) => OpEffect | undefined,
): AuditEvent[] {
	const events: AuditEvent[] = [];
	for (const s of steps) {
		const effect = effectOf(s.op) ?? "none";
		if (s.result !== "ok" || effect === "none") continue;
		const removal = effect === "removal";
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
