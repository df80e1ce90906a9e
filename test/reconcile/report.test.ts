/** The one definition of "failed", "pending" and "converged" that the CLI, daemon, status and metrics read. */
import { describe, expect, it } from "vitest";
import {
	certificateConvergence,
	certificateOnEndpoint,
	endpointState,
} from "../../src/reconcile/convergence.js";
import { cycleOutcome, outcomeLine } from "../../src/reconcile/outcome.js";
import {
	type CycleReport,
	type EndpointReport,
	emptyEndpointReport,
	type StepView,
	stepCounts,
} from "../../src/reconcile/report.js";

const step = (result: StepView["result"], ref = "a.pem"): StepView => ({
	op: "runtime-set",
	ref,
	certificate: "a",
	why: "stale",
	...(result ? { result } : {}),
	...(result === "failed" ? { error: { code: "RUNTIME_COMMAND_FAILED" as const, message: "refused" } } : {}),
});

function endpoint(name: string, steps: StepView[], extra: Partial<EndpointReport> = {}): EndpointReport {
	return {
		...emptyEndpointReport("lb", name),
		verdicts: [
			{
				class: steps.length > 0 ? "stale" : "in-sync",
				ref: "a.pem",
				certificate: "a",
				sides: ["runtime"],
				missingSides: [],
			},
		],
		steps,
		...extra,
	} as EndpointReport;
}

const cycle = (endpoints: EndpointReport[]): CycleReport => ({
	mode: "sync",
	startedAt: "2026-01-01T00:00:00Z",
	durationMs: 0,
	certificates: [],
	sourceProblems: [],
	targets: [{ target: "lb", kind: "haproxy-runtime", endpoints }],
});

describe("reconcile/report: each rule once", () => {
	it.each([
		["nothing", [], { total: 0, done: 0, failed: 0, skipped: 0, open: 0 }],
		["planned only", [undefined, undefined], { total: 2, done: 0, failed: 0, skipped: 0, open: 2 }],
		["all done", ["ok", "ok"], { total: 2, done: 2, failed: 0, skipped: 0, open: 0 }],
		["mixed", ["ok", "failed", "skipped", undefined], { total: 4, done: 1, failed: 1, skipped: 1, open: 3 }],
	] as const)("stepCounts: %s", (_title, results, counts) => {
		expect(stepCounts(results.map((r) => step(r)))).toEqual(counts);
	});

	it.each([
		["in sync, nothing to write", [], "converged"],
		["a planned write", [undefined], "pending"],
		["a skipped write", ["skipped"], "pending"],
		["a failed write", ["failed"], "failed"],
		["written", ["ok"], "converged"],
	] as const)("endpointState: %s is %s", (_title, results, state) => {
		expect(
			endpointState(
				endpoint(
					"lb1",
					results.map((r) => step(r)),
				),
			).state,
		).toBe(state);
	});

	it("an endpoint that did not answer is unobserved, not converged for any certificate, and counted so", () => {
		const down = emptyEndpointReport("lb", "lb2", { code: "ENDPOINT_UNAVAILABLE", message: "refused" });
		expect(down).toMatchObject({
			ok: false,
			error: { code: "ENDPOINT_UNAVAILABLE" },
			steps: [],
			durationMs: 0,
		});
		expect(endpointState(down)).toEqual({ state: "unobserved", reason: "ENDPOINT_UNAVAILABLE: refused" });
		const up = endpoint("lb1", []);
		expect(certificateConvergence([up, down], "a")).toEqual({
			converged: 1,
			total: 2,
			reasons: ["lb2: not observed: ENDPOINT_UNAVAILABLE: refused"],
		});
		expect(cycleOutcome(cycle([up, down]))).toMatchObject({
			endpoints: 2,
			convergedEndpoints: 1,
			pending: 0,
			converged: false,
		});
	});

	it("pending counts every write not done, failed ones too; converged needs none", () => {
		const outcome = cycleOutcome(
			cycle([endpoint("lb1", [step("ok"), step("failed")]), endpoint("lb2", [step(undefined)])]),
		);
		expect(outcome).toMatchObject({ pending: 2, convergedEndpoints: 0, converged: false });
		expect(outcome.failures.map((f) => f.code)).toEqual(["RUNTIME_COMMAND_FAILED"]);
		expect(cycleOutcome(cycle([endpoint("lb1", [step("ok")])]))).toMatchObject({
			pending: 0,
			converged: true,
		});
	});

	it("a certificate only a reload makes live (no crt_list): pending on the endpoint too, never 'converged' beside a 0/1", () => {
		const waiting: EndpointReport = {
			...emptyEndpointReport("lb", "lb1"),
			verdicts: [{ class: "missing", ref: "a.pem", certificate: "a" }],
			steps: [{ op: "storage-create", ref: "a.pem", certificate: "a", why: "missing", result: "ok" }],
			notes: [
				"a.pem: written to storage; HAProxy will serve it after its next reload (configure crt_list to make new certificates live without one)",
			],
		};
		expect(certificateOnEndpoint(waiting, "a")).toMatchObject({
			state: "pending",
			converged: false,
			reason:
				"missing: written to storage; HAProxy will serve it after its next reload (configure crt_list to make new certificates live without one)",
		});
		expect(endpointState(waiting)).toMatchObject({
			state: "pending",
			reason: expect.stringMatching(/^a: missing: written to storage/),
		});
		expect(certificateConvergence([waiting], "a")).toMatchObject({ converged: 0, total: 1 });
		expect(cycleOutcome(cycle([waiting]))).toMatchObject({
			pending: 1,
			convergedEndpoints: 0,
			converged: false,
		});
	});

	it("a sync that wrote and converged says how many writes it did, not 'nothing to do'", () => {
		const outcome = cycleOutcome(cycle([endpoint("lb1", [step("ok"), step("ok")])]));
		expect(outcomeLine(outcome, "sync")).toBe("converged: 2 writes done");
		expect(outcomeLine(cycleOutcome(cycle([endpoint("lb1", [])])), "sync")).toBe("converged: nothing to do");
	});
});
