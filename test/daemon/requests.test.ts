/** answerFor: what a finished cycle tells the operator who asked for `renew`/`revoke` (pure, scenario table). */
import { describe, expect, it } from "vitest";
import { answerFor } from "../../src/daemon/requests.js";
import { CertificateeError } from "../../src/errors.js";
import type { RenewalView } from "../../src/reconcile/model.js";
import {
	type CycleReport,
	type EndpointReport,
	emptyEndpointReport,
	type StepView,
} from "../../src/reconcile/report.js";
import type { OperatorRequest } from "../../src/store/requests.js";

const request: OperatorRequest = {
	id: "r1",
	kind: "renew",
	certificate: "a",
	force: false,
	requestedAt: "2026-01-01T00:00:00.000Z",
	expiresAt: "2026-01-01T00:10:00.000Z",
};
const takenAt = new Date("2026-01-01T00:00:01.000Z");
const now = new Date("2026-01-01T00:00:03.000Z");

const written = (result: StepView["result"]): StepView => ({
	op: "runtime-set",
	ref: "a.pem",
	certificate: "a",
	why: "stale",
	...(result ? { result } : {}),
	...(result === "failed" ? { error: { code: "RUNTIME_COMMAND_FAILED" as const, message: "refused" } } : {}),
});

function endpoint(name: string, result: StepView["result"]): EndpointReport {
	return {
		...emptyEndpointReport("lb", name),
		verdicts: [{ class: "stale", ref: "a.pem", certificate: "a", sides: ["runtime"], missingSides: [] }],
		steps: [written(result)],
	} as EndpointReport;
}

const renewal = (order: RenewalView["order"], extra: Partial<RenewalView> = {}): RenewalView => ({
	certificate: "a",
	issuer: "ca",
	names: ["a.test"],
	state: "issued",
	nextAttemptAt: "2026-02-01T00:00:00.000Z",
	reason: "Scheduled",
	message: "renews later",
	failures: 0,
	serial: "0B",
	...(order ? { order } : {}),
	...extra,
});

const cycle = (renewals: RenewalView[], endpoints: EndpointReport[]): { report: CycleReport } => ({
	report: {
		mode: "sync",
		startedAt: "2026-01-01T00:00:01Z",
		durationMs: 2000,
		certificates: [],
		sourceProblems: [],
		renewals,
		targets: [{ target: "lb", kind: "haproxy-runtime", endpoints }],
	},
});

const ordered = { result: "ok" as const, reason: "Forced", message: "an operator asked" };

describe("daemon/requests: answerFor", () => {
	it.each([
		[
			"ordered and written everywhere",
			cycle([renewal(ordered)], [endpoint("lb1", "ok"), endpoint("lb2", "ok")]),
			"served",
			/^serial 0B served on 2\/2 endpoints$/,
		],
		[
			"one endpoint's write failed",
			cycle([renewal(ordered)], [endpoint("lb1", "ok"), endpoint("lb2", "failed")]),
			"failed",
			/served on 1\/2 endpoints: lb2: runtime-set failed: RUNTIME_COMMAND_FAILED/,
		],
		[
			"the order failed",
			cycle(
				[
					renewal(
						{ result: "failed", reason: "Forced", message: "x" },
						{ lastError: { code: "ACME_ERROR", message: "rate limited" } },
					),
				],
				[],
			),
			"failed",
			/^order failed: ACME_ERROR: rate limited$/,
		],
		["not ordered", cycle([renewal(undefined)], []), "failed", /^not ordered: renews later$/],
		[
			"the cycle could not run",
			{ error: new CertificateeError("CLUSTER_UNAVAILABLE", "etcd down") },
			"failed",
			/cycle could not run: etcd down/,
		],
	] as const)("%s: %s", (_title, end, state, message) => {
		const answer = answerFor(request, takenAt, end, now, 42);
		expect(answer).toMatchObject({
			id: "r1",
			state,
			takenAt: takenAt.toISOString(),
			at: now.toISOString(),
			pid: 42,
		});
		expect(answer.message).toMatch(message);
		if (state === "failed") expect(answer.error?.code).toMatch(/^[A-Z_]+$/);
	});
});
