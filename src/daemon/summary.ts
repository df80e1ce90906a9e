import type { AuditEvent } from "../reconcile/audit.js";
import { type CycleReport, cycleOutcome, stepCounts } from "../reconcile/report.js";

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
