/** liveness and readiness, directly (time passed in): what /healthz and /readyz answer in each loop state. */
import { describe, expect, it } from "vitest";
import { cycleTimeoutMs, type LoopHealth, liveness, readiness } from "../../src/metrics/health.js";
import type { CycleReport, EndpointReport } from "../../src/reconcile/report.js";

const MIN = 60_000;
const base: LoopHealth = { intervalMs: 10 * MIN, startedAt: 0, configLoaded: true };

function endpoint(target: string, name: string, ok: boolean): EndpointReport {
	return {
		target,
		endpoint: name,
		ok,
		...(ok ? {} : { error: { code: "ENDPOINT_UNAVAILABLE", message: `${name}: cannot connect` } }),
		verdicts: [],
		steps: [],
		notes: [],
		served: [],
		refs: [],
		durationMs: 1,
	};
}

function report(targets: Record<string, boolean[]>): CycleReport {
	return {
		mode: "sync",
		startedAt: new Date(0).toISOString(),
		durationMs: 1,
		certificates: [],
		sourceProblems: [],
		targets: Object.entries(targets).map(([target, oks]) => ({
			target,
			kind: "haproxy-dataplane",
			endpoints: oks.map((ok, i) => endpoint(target, `${target}-${i}`, ok)),
		})),
	};
}

describe("liveness (/healthz): a cycle finished within 3 × interval, or one running younger than its timeout", () => {
	it.each([
		{ name: "starting, no cycle yet", h: base, now: MIN, ok: true },
		{
			name: "last cycle 29 min ago (interval 10m)",
			h: { ...base, lastFinishedAt: 0 },
			now: 29 * MIN,
			ok: true,
		},
		{ name: "last cycle 31 min ago", h: { ...base, lastFinishedAt: 0 }, now: 31 * MIN, ok: false },
		{
			name: "a cycle running for 20 min, younger than its timeout",
			h: { ...base, lastFinishedAt: 0, cycleRunningSince: MIN },
			now: 21 * MIN,
			ok: true,
		},
		{
			name: "a cycle running past its timeout (stuck)",
			h: { ...base, cycleRunningSince: MIN },
			now: MIN + cycleTimeoutMs(10 * MIN) + 1,
			ok: false,
		},
	])("$name: $ok", ({ h, now, ok }) => {
		expect(liveness(h, now).ok).toBe(ok);
	});
});

describe("readiness (/readyz): configuration loaded and the last cycle observed an endpoint of each target", () => {
	it.each([
		{ name: "no cycle yet", h: base, ready: false, unobserved: [] },
		{
			name: "every endpoint of one target down",
			h: { ...base, last: report({ a: [true], b: [false, false] }) },
			ready: false,
			unobserved: ["b"],
		},
		{
			name: "one endpoint of each target up",
			h: { ...base, last: report({ a: [true], b: [false, true] }) },
			ready: true,
			unobserved: [],
		},
		{
			name: "the latest cycle could not run (etcd unreachable), after one that observed everything",
			h: {
				...base,
				last: report({ a: [true] }),
				lastCycleError: "CLUSTER_UNAVAILABLE: etcd get failed",
			},
			ready: false,
			unobserved: [],
		},
		{
			name: "configuration not loaded",
			h: { ...base, configLoaded: false, last: report({ a: [true] }) },
			ready: false,
			unobserved: [],
		},
	])("$name: $ready", ({ h, ready, unobserved }) => {
		const r = readiness(h);
		expect(r.ready).toBe(ready);
		expect(r.unobservedTargets).toEqual(unobserved);
	});

	it("names every endpoint that failed, even when ready", () => {
		const r = readiness({ ...base, last: report({ b: [false, true] }) });
		expect(r.failedEndpoints).toEqual([
			{ target: "b", endpoint: "b-0", error: "ENDPOINT_UNAVAILABLE: b-0: cannot connect" },
		]);
	});
});
