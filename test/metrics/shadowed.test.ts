import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/metrics/index.js";
import type { CycleReport } from "../../src/reconcile/report.js";

describe("metrics: shadowed names", () => {
	it("exports one series per shadowed name, naming the culprit ref", async () => {
		const metrics = createMetrics();
		const report: CycleReport = {
			mode: "plan",
			startedAt: new Date().toISOString(),
			durationMs: 1,
			certificates: [],
			sourceProblems: [],
			targets: [
				{
					target: "lb",
					kind: "haproxy-dataplane",
					endpoints: [
						{
							target: "lb",
							endpoint: "fra1",
							ok: true,
							verdicts: [
								{
									class: "shadowed",
									sni: "shop.test",
									certificate: "shop",
									servedSerial: "0E02",
									servedBy: "b_partial.pem",
									why: "after the runtime update of shop.pem, HAProxy serves b_partial.pem for shop.test",
								},
							],
							steps: [],
							notes: [],
							served: [],
							refs: [],
							durationMs: 1,
						},
					],
				},
			],
		};
		metrics.recordCycle(report);
		const text = await metrics.registry.metrics();
		expect(text).toContain(
			'certificatee_shadowed_names{target="lb",endpoint="fra1",sni="shop.test",certificate="shop",served_by="b_partial.pem"} 1',
		);
	});
});
