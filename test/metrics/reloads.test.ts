/** Reloads in the metrics and in `status` (JSON and text), from one endpoint report. */
import { describe, expect, it } from "vitest";
import { reloadsLine } from "../../src/cli/print.js";
import { createMetrics } from "../../src/metrics/index.js";
import { statusSummary } from "../../src/metrics/status-view.js";
import type { CycleReport, EndpointReport } from "../../src/reconcile/report.js";

const endpoint: EndpointReport = {
	target: "lb",
	endpoint: "lb1",
	ok: true,
	verdicts: [],
	steps: [],
	notes: [],
	served: [],
	refs: [],
	durationMs: 1,
	reloads: {
		budget: { maxPerHour: 1, used: 1, remaining: 0, nextAt: "2026-12-02T13:00:00.000Z" },
		recent: [{ at: "2026-12-02T12:00:00.000Z", reasons: ["too-large"], result: "failed" }],
		cycle: {
			decision: "reloaded",
			reasons: ["too-large"],
			certificates: ["big"],
			message: "certificatee reloaded HAProxy (too-large: big.pem): HAProxy failed to load its configuration",
			result: "failed",
		},
		breaker: { openedAt: "2026-12-02T12:00:00.000Z", code: "RELOAD_FAILED", message: "show proc: failed 1" },
	},
};
const report: CycleReport = {
	mode: "sync",
	startedAt: "2026-12-02T12:00:00.000Z",
	durationMs: 10,
	certificates: [],
	sourceProblems: [],
	targets: [{ target: "lb", kind: "haproxy-runtime", endpoints: [endpoint] }],
};

describe("reloads in metrics and status", () => {
	it("metrics: budget remaining, reloads by reason and result, breaker open", async () => {
		const m = createMetrics();
		m.recordCycle(report);
		const text = await m.registry.metrics();
		expect(text).toContain('certificatee_reload_budget_remaining{target="lb",endpoint="lb1"} 0');
		expect(text).toContain('certificatee_reload_breaker_open{target="lb",endpoint="lb1"} 1');
		expect(text).toContain(
			'certificatee_reloads_total{target="lb",endpoint="lb1",reason="too-large",result="failed"} 1',
		);
	});

	it("status: JSON carries the budget, the reloads and why, the breaker; the text says it in one line", () => {
		const summary = statusSummary(report);
		expect(summary.endpoints[0]?.reloads).toEqual(endpoint.reloads);
		expect(summary.endpoints[0]?.state).toBe("failed");
		expect(summary.endpoints[0]?.reason).toMatch(/^RELOAD_FAILED: lb\/lb1: reload breaker open/);
		expect(reloadsLine(endpoint.reloads)).toBe(
			"0 of 1 left this hour (next allowed at 2026-12-02T13:00:00.000Z); done: 2026-12-02T12:00:00.000Z too-large failed; breaker OPEN since 2026-12-02T12:00:00.000Z: show proc: failed 1",
		);
		expect(reloadsLine({ budget: { maxPerHour: 0, used: 0, remaining: 0 }, recent: [] })).toBeUndefined();
	});
});
