/** Each endpoint: up, when it last took every write, its legacy duplicates, and the writes made on it. */
import { Counter, type Registry } from "prom-client";
import { endpointFailures } from "../reconcile/failures.js";
import type { CycleReport, EndpointReport } from "../reconcile/report.js";
import { endpointKey, type LastCycle, scrapeGauges } from "./last-cycle.js";

export function registerEndpointMetrics(
	registry: Registry,
	cycle: LastCycle,
): { recordCycle(report: CycleReport): void } {
	const gauge = scrapeGauges(registry);
	const lastSuccess = new Map<string, number>();
	gauge(
		"certificatee_endpoint_up",
		"1 when the endpoint answered the last observation.",
		["target", "endpoint"],
		(g) => {
			for (const e of cycle.endpoints()) g.set({ target: e.target, endpoint: e.endpoint }, e.ok ? 1 : 0);
		},
	);
	gauge(
		"certificatee_endpoint_last_success_timestamp_seconds",
		"When the endpoint last completed a cycle without failure.",
		["target", "endpoint"],
		(g) => {
			for (const e of cycle.endpoints()) {
				const t = lastSuccess.get(endpointKey(e));
				if (t !== undefined) g.set({ target: e.target, endpoint: e.endpoint }, t);
			}
		},
	);
	gauge(
		"certificatee_legacy_duplicates",
		"Legacy duplicates by state: found, deleted (this cycle), pending_reload, pinned, ambiguous.",
		["target", "endpoint", "state"],
		(g) => {
			for (const e of cycle.endpoints()) {
				if (!e.ok) continue;
				const labels = { target: e.target, endpoint: e.endpoint };
				for (const [state, count] of Object.entries(duplicateCounts(e))) g.set({ ...labels, state }, count);
			}
		},
	);
	const operations = new Counter({
		name: "certificatee_sync_operations_total",
		help: "Writes made on endpoints, by operation and result.",
		labelNames: ["target", "endpoint", "operation", "result"],
		registers: [registry],
	});
	const reloads = new Counter({
		name: "certificatee_reloads_caused_total",
		help: "Reloads an endpoint scheduled in answer to certificatee's writes (expected to stay 0).",
		labelNames: ["target", "endpoint", "reason"],
		registers: [registry],
	});
	return {
		recordCycle(report) {
			for (const e of report.targets.flatMap((t) => t.endpoints)) {
				const labels = { target: e.target, endpoint: e.endpoint };
				for (const s of e.steps) {
					if (s.result === undefined || s.result === "skipped") continue;
					operations.inc({ ...labels, operation: s.op, result: s.result });
					if (s.reloadCaused) reloads.inc({ ...labels, reason: s.op });
				}
				// The endpoint answered and took every write (a refused update or a probe mismatch is no failure of it).
				if (endpointFailures(e).every((f) => f.kind !== "endpoint" && f.kind !== "write")) {
					lastSuccess.set(endpointKey(e), Date.parse(report.startedAt) / 1000 + report.durationMs / 1000);
				}
			}
		},
	};
}

/** The endpoint's legacy duplicates by state (the `state` label), deleted counting this cycle's deletions. */
function duplicateCounts(e: EndpointReport): Record<string, number> {
	const count = (cls: string) => e.verdicts.filter((v) => v.class === cls).length;
	const deleted = new Set(
		e.steps
			.filter((s) => (s.op === "storage-delete" || s.op === "runtime-delete") && s.result === "ok")
			.map((s) => s.ref),
	).size;
	return {
		found: count("legacy-duplicate") + count("deleted-pending-reload") + count("pinned"),
		deleted,
		pending_reload: count("deleted-pending-reload"),
		pinned: count("pinned"),
		ambiguous: count("ambiguous"),
		unaddressable: count("unaddressable"),
	};
}
