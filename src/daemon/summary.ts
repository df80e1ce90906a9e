import type { AuditEvent } from "../reconcile/audit.js";
import { cycleOutcome } from "../reconcile/outcome.js";
import { type CycleReport, stepCounts } from "../reconcile/report.js";
import type { Replacement } from "../store/records.js";

/** One log line's worth of a cycle; the words come from the report's one definition (cycleOutcome, stepCounts). */
export function summarise(report: CycleReport): {
	certificates: number;
	endpoints: number;
	converged: number;
	writes: number;
	pending: number;
	failed: number;
	durationMs: number;
} {
	const outcome = cycleOutcome(report);
	const writes = stepCounts(report.targets.flatMap((t) => t.endpoints.flatMap((e) => e.steps))).done;
	return {
		certificates: report.certificates.length,
		endpoints: outcome.endpoints,
		converged: outcome.convergedEndpoints,
		writes,
		pending: outcome.pending,
		failed: outcome.failures.length,
		durationMs: report.durationMs,
	};
}

const AUDIT_MESSAGE: Record<AuditEvent["event"], string> = {
	write: "certificate written",
	removal: "certificate removed",
	"served-change": "served certificate changed",
};

/** The audit trail of a sync cycle: one log line per write, removal and served change (reconcile/audit.ts). */
export function auditLines(report: CycleReport): Array<{ fields: AuditEvent; message: string }> {
	return report.targets.flatMap((t) =>
		t.endpoints.flatMap((e) => (e.audit ?? []).map((a) => ({ fields: a, message: AUDIT_MESSAGE[a.event] }))),
	);
}

/** The audit line of a deliberate replacement (`certificatee replace`): who, what, the old and new serial, why. */
export const REPLACEMENT_RECORDED = "deliberate replacement recorded";
export const REPLACEMENT_IN_EFFECT =
	"deliberate replacement in effect: never-downgrade lifted for this certificate";

export function replacementAudit(r: Replacement): Record<string, unknown> {
	return {
		audit: "replacement",
		certificate: r.certificate,
		by: r.by,
		reason: r.reason,
		requestedAt: r.requestedAt,
		...(r.replaces ? { oldSerial: r.replaces.serial, oldNotAfter: r.replaces.notAfter } : {}),
		newSerial: r.serial,
		newNotAfter: r.notAfter,
		...(r.file ? { file: r.file } : {}),
	};
}
