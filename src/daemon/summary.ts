import { type CycleReport, cycleOutcome } from "../reconcile/report.js";

/** One log line's worth of a cycle; the words come from the report's one definition (cycleOutcome). */
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
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	const writes = endpoints.reduce((n, e) => n + e.steps.filter((s) => s.result === "ok").length, 0);
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
