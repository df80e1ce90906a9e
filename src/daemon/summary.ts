import type { CycleReport } from "../reconcile/report.js";

/** One log line's worth of a cycle. */
export function summarise(report: CycleReport): {
	certificates: number;
	endpoints: number;
	converged: number;
	writes: number;
	failed: number;
	durationMs: number;
} {
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	const writes = endpoints.reduce((n, e) => n + e.steps.filter((s) => s.result === "ok").length, 0);
	const failed = endpoints.filter((e) => !e.ok || e.steps.some((s) => s.result === "failed")).length;
	const converged = endpoints.filter(
		(e) => e.ok && e.steps.every((s) => s.result === "ok") && e.served.every((s) => s.match),
	).length;
	return {
		certificates: report.certificates.length,
		endpoints: endpoints.length,
		converged,
		writes,
		failed,
		durationMs: report.durationMs,
	};
}
