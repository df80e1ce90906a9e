/** The reloads certificatee does on purpose: what is left of each endpoint's budget, its breaker, and those done. */
import { Counter, type Registry } from "prom-client";
import type { CycleReport } from "../reconcile/report.js";
import { type LastCycle, scrapeGauges } from "./last-cycle.js";

export function registerReloadMetrics(
	registry: Registry,
	cycle: LastCycle,
): { recordCycle(report: CycleReport): void } {
	const gauge = scrapeGauges(registry);
	gauge(
		"certificatee_reload_budget_remaining",
		"Reloads certificatee may still do on the endpoint in the sliding hour (reloads.max_per_hour minus those done).",
		["target", "endpoint"],
		(g) => {
			for (const e of cycle.endpoints())
				if (e.reloads) g.set({ target: e.target, endpoint: e.endpoint }, e.reloads.budget.remaining);
		},
	);
	gauge(
		"certificatee_reload_breaker_open",
		"1 while a failed reload (or one after which the node did not serve what was written) stops writes to the endpoint.",
		["target", "endpoint"],
		(g) => {
			for (const e of cycle.endpoints())
				if (e.reloads) g.set({ target: e.target, endpoint: e.endpoint }, e.reloads.breaker ? 1 : 0);
		},
	);
	const reloadsDone = new Counter({
		name: "certificatee_reloads_total",
		help: "Reloads certificatee did on purpose (reloads.max_per_hour), by reason and result (ok, failed, not_served).",
		labelNames: ["target", "endpoint", "reason", "result"],
		registers: [registry],
	});
	return {
		recordCycle(report) {
			for (const e of report.targets.flatMap((t) => t.endpoints)) {
				const done = e.reloads?.cycle;
				if (done?.decision !== "reloaded" || !done.result) continue;
				const result = done.result === "not-served" ? "not_served" : done.result;
				for (const reason of done.reasons)
					reloadsDone.inc({ target: e.target, endpoint: e.endpoint, reason, result });
			}
		},
	};
}
