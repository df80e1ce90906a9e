/**
 * The cycle loop: when the last cycle finished and the interval (the liveness /healthz reports), which targets it
 * observed (what /readyz requires), what its sources could not use, and how long cycles take.
 */
import { Histogram, type Registry } from "prom-client";
import { cycleOutcome } from "../reconcile/outcome.js";
import type { CycleReport } from "../reconcile/report.js";
import { type LastCycle, scrapeGauges, seconds } from "./last-cycle.js";

export interface CycleMetrics {
	recordCycle(report: CycleReport): void;
	recordInterval(ms: number): void;
}

export function registerCycleMetrics(registry: Registry, cycle: LastCycle): CycleMetrics {
	const gauge = scrapeGauges(registry);
	let intervalSeconds: number | undefined;
	registerSourceProblemMetrics(registry, cycle);
	gauge(
		"certificatee_cycle_last_finished_timestamp_seconds",
		"When the last cycle finished; with certificatee_cycle_interval_seconds, the liveness /healthz reports.",
		[],
		(g) => {
			const last = cycle.report();
			if (last !== undefined) g.set(seconds(last.startedAt) + last.durationMs / 1000);
		},
	);
	gauge("certificatee_cycle_interval_seconds", "The configured interval between cycles.", [], (g) => {
		if (intervalSeconds !== undefined) g.set(intervalSeconds);
	});
	gauge(
		"certificatee_target_observed",
		"1 when the last cycle observed at least one endpoint of the target (what /readyz requires of every target).",
		["target"],
		(g) => {
			const last = cycle.report();
			if (last === undefined) return;
			const unobserved = new Set(cycleOutcome(last).unobservedTargets);
			for (const t of last.targets) g.set({ target: t.target }, unobserved.has(t.target) ? 0 : 1);
		},
	);
	const cycleDuration = new Histogram({
		name: "certificatee_cycle_duration_seconds",
		help: "Duration of whole cycles.",
		labelNames: ["mode"],
		buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
		registers: [registry],
	});
	return {
		recordCycle(report) {
			cycleDuration.observe({ mode: report.mode }, report.durationMs / 1000);
		},
		recordInterval(ms) {
			intervalSeconds = ms / 1000;
		},
	};
}

/** Source files and stored certificates the last cycle could not use: in all, and per certificate. */
function registerSourceProblemMetrics(registry: Registry, cycle: LastCycle): void {
	const gauge = scrapeGauges(registry);
	gauge(
		"certificatee_source_problems",
		"Source files and stored certificates the last cycle could not use (failed orders are counted apart).",
		[],
		(g) => {
			const last = cycle.report();
			if (last !== undefined) g.set(last.sourceProblems.length);
		},
	);
	gauge(
		"certificatee_certificate_source_problems",
		"Files of the certificate's name its source could not use (invalid, or expiring before the one served): the certificate served is the last valid one.",
		["certificate"],
		(g) => {
			for (const c of cycle.summary()?.certificates ?? [])
				g.set({ certificate: c.name }, c.problems?.length ?? 0);
		},
	);
}
