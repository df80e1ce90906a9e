/** The full-observation schedule (full-schedule.ts): each endpoint's phase, and how the count moves. Pure. */
import { describe, expect, it } from "vitest";
import {
	fullIsDue,
	fullPhase,
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
});
