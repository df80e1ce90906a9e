/**
 * The rollout's decisions, pure: the canary choice, a stage at the start of a cycle, and after the canaries'
 * checks. A table per decision; the HAProxy fleet test (rollout-haproxy.test.ts) runs them against real nodes.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import {
	advance,
	afterChecks,
	chooseCanaries,
	type RolloutPolicy,
	type RolloutRecord,
	restHold,
	versionOf,
} from "../../src/reconcile/rollout-stages.js";
import type { CheckResult } from "../../src/reconcile/rollout-view.js";
import { desiredCert } from "./scenario.js";

const endpoints = ["a/1", "a/2", "b/b", "c/c", "d/d"];
const policy: RolloutPolicy = { canary: { count: 1 }, verify: ["serial"], holdMs: 60_000 };
const t0 = new Date("2026-12-03T10:00:00Z");
const at = (s: number) => new Date(t0.getTime() + s * 1000);
let cert: DesiredCertificate;
let renewed: DesiredCertificate;

beforeAll(async () => {
	cert = await desiredCert("web", ["web.test"]);
	renewed = await desiredCert("web", ["web.test"]);
});

const ok = (c: string): CheckResult[] => [{ certificate: c, check: "serial", ok: true }];
const bad: CheckResult[] = [
	{
		certificate: "web",
		check: "trust",
		ok: false,
		code: "ROLLOUT_CHAIN_UNTRUSTED",
		message: "no",
		hint: "add it",
	},
];

describe("reconcile/rollout", () => {
	it.each([
		[{ count: 1 }, ["a/1"]],
		[{ count: 2 }, ["a/1", "a/2"]],
		[{ count: 9 }, endpoints],
		[{ percent: 20 }, ["a/1"]],
		[{ percent: 21 }, ["a/1", "a/2"]],
		[{ percent: 1 }, ["a/1"]],
	] as const)("canary %o of five: %o (configuration order, rounded up, at least one)", (canary, want) => {
		expect(chooseCanaries(endpoints, canary)).toEqual(want);
	});

	it("a new version starts at canary; the same one is kept; a hold that is over lets the rest go", () => {
		const fresh = advance(undefined, cert, endpoints, policy, t0);
		expect(fresh).toMatchObject({ stage: "canary", canaries: ["a/1"], version: versionOf(cert.bundle) });
		expect(advance(fresh, cert, endpoints, policy, at(5))).toBe(fresh);
		const held: RolloutRecord = { ...fresh, stage: "hold", holdUntil: at(60).toISOString() };
		expect(advance(held, cert, endpoints, policy, at(59)).stage).toBe("hold");
		expect(advance(held, cert, endpoints, policy, at(60))).toMatchObject({
			stage: "rest",
			completedAt: at(60).toISOString(),
		});
		const halted: RolloutRecord = { ...fresh, stage: "halted" };
		expect(advance(halted, cert, endpoints, policy, at(9)).stage).toBe("halted");
		expect(advance(halted, renewed, endpoints, policy, at(9))).toMatchObject({
			stage: "canary",
			verified: {},
		});
	});

	it("checks: all canaries ok -> hold for `hold`; a failure -> halted naming it; ok again -> hold; no hold -> rest", () => {
		const fresh = advance(undefined, cert, endpoints, policy, t0);
		const none = afterChecks(fresh, new Map(), policy, at(1));
		expect(none.stage).toBe("canary");
		const halted = afterChecks(fresh, new Map([["a/1", bad]]), policy, at(1));
		expect(halted).toMatchObject({
			stage: "halted",
			failure: { endpoint: "a/1", check: "trust", code: "ROLLOUT_CHAIN_UNTRUSTED", hint: "add it" },
		});
		expect(restHold(halted)).toMatchObject({ code: "ROLLOUT_HALTED", failed: false });
		expect(restHold(halted)?.message).toContain("ROLLOUT_CHAIN_UNTRUSTED on canary a/1: no");
		const held = afterChecks(halted, new Map([["a/1", ok("web")]]), policy, at(2));
		expect(held).toMatchObject({
			stage: "hold",
			holdUntil: at(62).toISOString(),
			verified: { "a/1": at(2).toISOString() },
		});
		expect(held.failure).toBeUndefined();
		// Verified again during the hold: unchanged (the record is not written again).
		expect(afterChecks(held, new Map([["a/1", ok("web")]]), policy, at(30))).toEqual(held);
		expect(afterChecks(held, new Map([["a/1", bad]]), policy, at(30)).stage).toBe("halted");
		expect(afterChecks(fresh, new Map([["a/1", ok("web")]]), { ...policy, holdMs: 0 }, at(3)).stage).toBe(
			"rest",
		);
		const rest = { ...held, stage: "rest" as const };
		expect(restHold(rest)).toBeUndefined();
		expect(afterChecks(rest, new Map([["a/1", bad]]), policy, at(99))).toBe(rest);
	});

	it("two canaries: hold only when both verified", () => {
		const two = { ...policy, canary: { count: 2 } };
		const fresh = advance(undefined, cert, endpoints, two, t0);
		const one = afterChecks(fresh, new Map([["a/1", ok("web")]]), two, at(1));
		expect(one.stage).toBe("canary");
		expect(restHold(one)?.code).toBe("ROLLOUT_CANARY");
		expect(afterChecks(one, new Map([["a/2", ok("web")]]), two, at(2)).stage).toBe("hold");
	});
});
