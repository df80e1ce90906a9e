import { describe, expect, it } from "vitest";
import {
	backoffMs,
	decideRenewal,
	type RenewalPolicyInput,
	renewAt,
	retryIntervalMs,
} from "../../src/renewal/policy.js";

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const t0 = new Date("2026-01-01T00:00:00Z");
const at = (ms: number) => new Date(t0.getTime() + ms);
/** A 90-day certificate issued at t0: the default window opens at day 60. */
const cert90 = { notBefore: t0, notAfter: at(90 * DAY) };

const base: RenewalPolicyInput = { now: at(DAY), current: cert90, jitter: 0, failures: 0, orders: [] };

interface Row {
	says: string;
	input: Partial<RenewalPolicyInput>;
	action: "renew-now" | "wait" | "breaker-open";
	reason: string;
	at?: Date;
}

const rows: Row[] = [
	{
		says: "orders at once when nothing was issued",
		input: { current: undefined },
		action: "renew-now",
		reason: "NotIssued",
	},
	{
		says: "orders at once when the config no longer matches",
		input: { mismatch: "names changed" },
		action: "renew-now",
		reason: "Mismatch",
	},
	{
		says: "waits until 1/3 of the lifetime is left",
		input: { now: at(30 * DAY) },
		action: "wait",
		reason: "Scheduled",
		at: at(60 * DAY),
	},
	{ says: "renews once the window opens", input: { now: at(60 * DAY) }, action: "renew-now", reason: "Due" },
	{
		says: "jitter moves renewAt into the first third of the window",
		input: { now: at(60 * DAY), jitter: 0.5 },
		action: "wait",
		reason: "Scheduled",
		at: at(60 * DAY + 0.5 * 30 * DAY * (1 / 3)),
	},
	{
		says: "honours a configured fraction",
		input: { now: at(40 * DAY), config: { renewFraction: 0.5 } },
		action: "wait",
		reason: "Scheduled",
		at: at(45 * DAY),
	},
	{
		says: "renew_before overrides the fraction",
		input: { now: at(70 * DAY), config: { renewBeforeMs: 10 * DAY } },
		action: "wait",
		reason: "Scheduled",
		at: at(80 * DAY),
	},
	{
		says: "an ARI window replaces the configured one",
		input: { now: at(10 * DAY), ari: { start: at(20 * DAY), end: at(22 * DAY) }, jitter: 0.5 },
		action: "wait",
		reason: "AriWindow",
		at: at(21 * DAY),
	},
	{
		says: "renews inside an open ARI window",
		input: { now: at(21 * DAY), ari: { start: at(20 * DAY), end: at(22 * DAY) }, jitter: 0.25 },
		action: "renew-now",
		reason: "Due",
	},
	{
		says: "an ARI window starting after notAfter is capped at the emergency floor (95% of the lifetime)",
		input: { now: at(10 * DAY), ari: { start: at(100 * DAY), end: at(110 * DAY) }, jitter: 0.5 },
		action: "wait",
		reason: "AriWindow",
		at: at(85.5 * DAY),
	},
	{
		says: "the emergency floor applies even when the ARI window lies beyond notAfter",
		input: { now: at(86 * DAY), ari: { start: at(100 * DAY), end: at(110 * DAY) } },
		action: "renew-now",
		reason: "Emergency",
	},
	{
		says: "backs off 1 min after the first failure",
		input: { now: at(61 * DAY), failures: 1, lastFailureAt: at(61 * DAY - 30_000) },
		action: "wait",
		reason: "Backoff",
		at: at(61 * DAY + 30_000),
	},
	{
		says: "retries once the backoff has passed",
		input: { now: at(61 * DAY), failures: 3, lastFailureAt: at(61 * DAY - 4 * MIN) },
		action: "renew-now",
		reason: "Due",
	},
	{
		says: "backoff is capped at 1 h",
		input: { now: at(61 * DAY), failures: 20, lastFailureAt: at(61 * DAY) },
		action: "wait",
		reason: "Backoff",
		at: at(61 * DAY + HOUR),
	},
	{
		says: "a permanent failure (needs a human) backs off to the cap at once",
		input: { now: at(61 * DAY), failures: 1, lastFailureAt: at(61 * DAY), lastFailurePermanent: true },
		action: "wait",
		reason: "Backoff",
		at: at(61 * DAY + HOUR),
	},
	{
		says: "a forced renewal orders now, through backoff and an open breaker, even when not due",
		input: {
			now: at(10 * DAY),
			failures: 3,
			lastFailureAt: at(10 * DAY),
			lastFailurePermanent: true,
			orders: [1, 2, 3, 4, 5].map((h) => at(10 * DAY - h * HOUR)),
			forced: true,
		},
		action: "renew-now",
		reason: "Forced",
	},
	{
		says: "the emergency floor (1/20 left) ignores backoff",
		input: { now: at(86 * DAY), failures: 8, lastFailureAt: at(86 * DAY) },
		action: "renew-now",
		reason: "Emergency",
	},
	{
		says: "an expired certificate is an emergency",
		input: { now: at(91 * DAY) },
		action: "renew-now",
		reason: "Emergency",
	},
	{
		says: "the breaker opens after 5 orders in 24 h, until the oldest ages out",
		input: { now: at(61 * DAY), orders: [1, 2, 3, 4, 5].map((h) => at(60 * DAY + h * HOUR)) },
		action: "breaker-open",
		reason: "BreakerOpen",
		at: at(61 * DAY + HOUR),
	},
	{
		says: "the breaker holds even in an emergency",
		input: { now: at(89 * DAY), orders: [1, 2, 3, 4, 5].map((h) => at(88 * DAY + h * HOUR)) },
		action: "breaker-open",
		reason: "BreakerOpen",
	},
	{
		says: "orders older than 24 h do not count",
		input: { now: at(62 * DAY), orders: [1, 2, 3, 4, 5].map((h) => at(60 * DAY + h * HOUR)) },
		action: "renew-now",
		reason: "Due",
	},
	{
		says: "a configured breaker limit applies",
		input: {
			now: at(61 * DAY),
			config: { maxOrdersPerDay: 2 },
			orders: [at(61 * DAY - HOUR), at(61 * DAY - MIN)],
		},
		action: "breaker-open",
		reason: "BreakerOpen",
		at: at(62 * DAY - HOUR),
	},
	{
		says: "a not-yet-due certificate waits even with the breaker open",
		input: { now: at(10 * DAY), orders: [1, 2, 3, 4, 5].map((h) => at(10 * DAY - h * MIN)) },
		action: "wait",
		reason: "Scheduled",
	},
];

describe("renewal/policy", () => {
	it.each(rows)("$says", (row) => {
		const decision = decideRenewal({ ...base, ...row.input });
		expect(decision.action).toBe(row.action);
		expect(decision.reason).toBe(row.reason);
		if (row.at) expect(decision.at.toISOString()).toBe(row.at.toISOString());
		expect(decision.message.length).toBeGreaterThan(0);
	});

	it("backoff doubles from 1 min to 1 h", () => {
		expect([0, 1, 2, 3, 4, 6, 7, 50].map((n) => backoffMs(n))).toEqual([
			0,
			MIN,
			2 * MIN,
			4 * MIN,
			8 * MIN,
			32 * MIN,
			HOUR,
			HOUR,
		]);
	});

	it("renewAt always lies inside the renewal window", () => {
		for (const jitter of [0, 0.1, 0.5, 0.999, 1, -1]) {
			const r = renewAt(cert90, jitter).at.getTime();
			expect(r).toBeGreaterThanOrEqual(at(60 * DAY).getTime());
			expect(r).toBeLessThan(at(90 * DAY).getTime());
		}
	});

	describe("lifetimes of days", () => {
		/** A 6-day certificate issued at t0 (under 10 days: renewed at half of its lifetime). */
		const cert6 = { notBefore: t0, notAfter: at(6 * DAY) };
		const short: RenewalPolicyInput = { now: at(DAY), current: cert6, jitter: 0, failures: 0, orders: [] };

		it("renews at half of a lifetime under 10 days, at a third from 10 days on", () => {
			expect(renewAt(cert6, 0).at).toEqual(at(3 * DAY));
			// The jitter spreads it over the first third of the window (3 d): up to day 4.
			expect(renewAt(cert6, 0.999_999).at.getTime()).toBeLessThanOrEqual(at(4 * DAY).getTime());
			expect(renewAt({ notBefore: t0, notAfter: at(160 * HOUR) }, 0).at).toEqual(at(80 * HOUR));
			expect(renewAt({ notBefore: t0, notAfter: at(10 * DAY) }, 0).at.getTime()).toBe(
				at(10 * DAY - (10 * DAY) / 3).getTime(),
			);
			// A configured window still wins.
			expect(renewAt(cert6, 0, { renewBeforeMs: DAY }).at).toEqual(at(5 * DAY));
			expect(decideRenewal({ ...short, now: at(2 * DAY) })).toMatchObject({
				action: "wait",
				at: at(3 * DAY),
			});
		});

		it("caps the backoff at 1/100 of the lifetime, between 1 min and 1 h", () => {
			expect(retryIntervalMs(6 * DAY)).toBe(HOUR);
			expect(retryIntervalMs(DAY)).toBe(14.4 * MIN);
			expect(retryIntervalMs(90_000)).toBe(MIN);
			expect(retryIntervalMs(undefined)).toBe(HOUR);
			expect(backoffMs(50, DAY)).toBe(14.4 * MIN);
		});

		it("a failing 6-day certificate never waits more than 1 h, and orders at once inside the floor", () => {
			// Every failure from renewAt on, one after the other: no wait is ever longer than the cap.
			let now = at(3 * DAY);
			let failures = 0;
			const waits: number[] = [];
			while (now.getTime() < cert6.notAfter.getTime()) {
				const d = decideRenewal({ ...short, now, failures, lastFailureAt: now });
				if (d.action === "breaker-open") throw new Error("the breaker counts successes only");
				if (d.reason === "Emergency") break;
				waits.push(d.at.getTime() - now.getTime());
				failures += 1;
				now = d.at.getTime() > now.getTime() ? d.at : new Date(now.getTime() + MIN);
			}
			expect(Math.max(...waits)).toBe(HOUR);
			// The emergency floor is 1/20 of the lifetime (7.2 h): reached with time for seven more attempts.
			expect(cert6.notAfter.getTime() - now.getTime()).toBeLessThanOrEqual(7.2 * HOUR);
			expect(cert6.notAfter.getTime() - now.getTime()).toBeGreaterThan(6 * HOUR);
			// A permanent failure waits the cap too, not a day.
			const permanent = decideRenewal({
				...short,
				now: at(3 * DAY),
				failures: 1,
				lastFailureAt: at(3 * DAY),
				lastFailurePermanent: true,
			});
			expect(permanent).toMatchObject({ action: "wait", reason: "Backoff", at: at(3 * DAY + HOUR) });
		});
	});
});
