import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/metrics/index.js";
import type { CycleReport } from "../../src/reconcile/report.js";

describe("metrics: shadowed names and names served per key type", () => {
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

	it("a name with an RSA and an ECDSA certificate matches only when both are served", async () => {
		const metrics = createMetrics();
		const view = (match: boolean) => ({ sni: "pair.test", certificate: "pair", expectedSerial: "01", match });
		const endpoint = (served: ReturnType<typeof view>[]) => ({
			target: "lb",
			endpoint: "fra1",
			ok: true,
			verdicts: [],
			steps: [],
			notes: [],
			served,
			refs: [],
			durationMs: 1,
		});
		const report = (served: ReturnType<typeof view>[]): CycleReport => ({
			mode: "sync",
			startedAt: new Date().toISOString(),
			durationMs: 1,
			certificates: [],
			sourceProblems: [],
			targets: [{ target: "lb", kind: "haproxy-runtime", endpoints: [endpoint(served)] }],
		});
		const line = 'certificatee_served_serial_match{target="lb",endpoint="fra1",sni="pair.test"}';
		metrics.recordCycle(report([view(false), view(true)]));
		expect(await metrics.registry.metrics()).toContain(`${line} 0`);
		metrics.recordCycle(report([view(true), view(true)]));
		expect(await metrics.registry.metrics()).toContain(`${line} 1`);
	});
});
