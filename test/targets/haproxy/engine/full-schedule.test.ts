/** The full-observation schedule (full-schedule.ts): each endpoint's phase, and how the count moves. Pure. */
import { describe, expect, it } from "vitest";
import {
	desiredChanged,
	desiredKey,
	fullIsDue,
	fullPhase,
	observationKind,
	scheduledFull,
	sinceFullAfter,
} from "../../../../src/targets/haproxy/engine/full-schedule.js";

/** The observation numbers (1-based) at which an endpoint observes in full on schedule, over `n` observations. */
function scheduledAt(phase: number, every: number, n: number): number[] {
	const at: number[] = [];
	let since: number | undefined;
	for (let k = 1; k <= n; k++) {
		const full = since === undefined ? "first" : fullIsDue(since, every) ? scheduledFull(every) : undefined;
		if (full === scheduledFull(every)) at.push(k);
		since = sinceFullAfter(since, full, every, phase);
	}
	return at;
}

describe("full-observation schedule", () => {
	it("spreads 100 endpoints evenly over every 10: ten per phase, the first at phase 0", () => {
		const phases = Array.from({ length: 100 }, (_, index) => fullPhase({ index, count: 100 }, 10));
		expect(phases[0]).toBe(0);
		for (let p = 0; p < 10; p++) expect(phases.filter((x) => x === p)).toHaveLength(10);
	});

	it("spreads fewer endpoints than the period apart; one endpoint, no place or every 1 is phase 0", () => {
		expect([0, 1, 2].map((index) => fullPhase({ index, count: 3 }, 10))).toEqual([0, 3, 6]);
		expect(fullPhase({ index: 0, count: 1 }, 10)).toBe(0);
		expect(fullPhase(undefined, 10)).toBe(0);
		expect(fullPhase({ index: 5, count: 8 }, 1)).toBe(0);
	});

	it("phase 0 is the plain schedule (the 11th, 21st … observation of every 10); a phase moves it earlier, period unchanged", () => {
		expect(scheduledAt(0, 10, 31)).toEqual([11, 21, 31]);
		expect(scheduledAt(3, 10, 31)).toEqual([8, 18, 28]);
		expect(scheduledAt(9, 10, 31)).toEqual([2, 12, 22]);
		expect(scheduledAt(0, 1, 4)).toEqual([2, 3, 4]);
	});

	it("a full observation for another reason keeps the count going; the scheduled one resets it", () => {
		expect(sinceFullAfter(undefined, "first", 10, 4)).toBe(4);
		expect(sinceFullAfter(4, "worker changed", 10, 4)).toBe(5);
		expect(sinceFullAfter(5, undefined, 10, 4)).toBe(6);
		expect(sinceFullAfter(9, scheduledFull(10), 10, 4)).toBe(0);
	});

	it("a cycle whose desired set changed defers a due scheduled full observation once; the next one is full", () => {
		// Every 3, phase 0: due at since 2 (the 3rd observation). Changed there: deferred; the 4th is full anyway,
		// changed or not, and the count restarts from it.
		expect(fullIsDue(1, 3, true)).toBe(false);
		expect(fullIsDue(2, 3, false)).toBe(true);
		expect(fullIsDue(2, 3, true)).toBe(false);
		const deferred = sinceFullAfter(2, undefined, 3, 0);
		expect(deferred).toBe(3);
		expect(fullIsDue(deferred, 3, true)).toBe(true);
		expect(sinceFullAfter(deferred, scheduledFull(3), 3, 0)).toBe(0);
		// every 1: each observation is full; nothing to defer to.
		expect(fullIsDue(0, 1, true)).toBe(true);
	});

	it("over 30 observations with a renewal every other one, a scheduled full observation is at most one late", () => {
		const at: number[] = [];
		let since: number | undefined;
		for (let k = 1; k <= 30; k++) {
			const changed = k % 2 === 0;
			const full =
				since === undefined ? "first" : fullIsDue(since, 5, changed) ? scheduledFull(5) : undefined;
			if (full === scheduledFull(5)) at.push(k);
			since = sinceFullAfter(since, full, 5, 0);
		}
		// Unchanged, every 5th: 6, 11, 16, 21, 26. Here each falls on a renewal (an even one) and is deferred by
		// one: the period becomes 6, never more, however often the desired set changes.
		expect(at).toEqual([7, 13, 19, 25]);
		for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeLessThanOrEqual(6);
	});

	it("desiredKey is the set's (order does not matter) and changes with any ref's leaf; unknown is unchanged", () => {
		const d = (ref: string, fingerprint: string) => ({
			ref,
			certificate: { bundle: { leaf: { fingerprint } } },
		});
		const one = desiredKey([d("a.pem", "aa"), d("b.pem", "bb")]);
		expect(desiredKey([d("b.pem", "bb"), d("a.pem", "aa")])).toBe(one);
		expect(desiredKey([d("a.pem", "aa"), d("b.pem", "bc")])).not.toBe(one);
		expect(desiredKey([d("a.pem", "aa")])).not.toBe(one);
		expect(desiredChanged(one, desiredKey([d("a.pem", "aa")]))).toBe(true);
		expect(desiredChanged(one, one)).toBe(false);
		expect(desiredChanged(undefined, one)).toBe(false);
		expect(desiredChanged(one, undefined)).toBe(false);
	});

	it("the observation field says when the scheduled full observation was deferred", () => {
		expect(observationKind("first", undefined, 10)).toBe("full (first)");
		expect(observationKind(undefined, 3, 10)).toBe("incremental");
		expect(observationKind(undefined, 9, 10)).toBe(
			"incremental (the full one, every 10, deferred: the desired certificates changed)",
		);
	});
});
