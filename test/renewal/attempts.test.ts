/** The issuer fallback rule and the attempt bookkeeping, as pure functions (no store, no issuer). */
import { describe, expect, it } from "vitest";
import { afterFailedOrder, afterIssued, attemptStarted, issuerIndex } from "../../src/renewal/attempts.js";
import type { RenewalRecord } from "../../src/store/records.js";

const state = (over: Partial<RenewalRecord> = {}): RenewalRecord => ({
	jitter: 0.5,
	failures: 0,
	orders: [],
	...over,
});

describe("renewal/attempts: the issuer fallback list", () => {
	it.each([
		// [why, failuresOnIssuer before, retryable, index, issuers, fallbackAfter, next, failuresOnIssuer after]
		["a transient failure below fallback_after stays on the issuer", 0, true, 0, 2, 3, undefined, 1],
		["the fallback_after-th transient failure moves on", 2, true, 0, 2, 3, 1, 0],
		["a permanent failure moves on at once", 0, false, 0, 2, 3, 1, 0],
		["the last issuer hands back to the first", 0, false, 1, 2, 1, 0, 0],
		["a single issuer never moves, even on a permanent failure", 4, false, 0, 1, 1, undefined, 5],
	] as const)("%s", (_why, before, retryable, index, issuers, fallbackAfter, next, after) => {
		const moved = afterFailedOrder(
			state({ failuresOnIssuer: before }),
			{ retryable },
			index,
			issuers,
			fallbackAfter,
		);
		expect(moved.next).toBe(next);
		expect(moved.state.failuresOnIssuer).toBe(after);
		if (next !== undefined) expect(issuerIndex(moved.state, issuers)).toBe(next);
	});

	it("after an issued certificate the next renewal starts from the preferred issuer", () => {
		const issued = afterIssued(state({ issuerIndex: 1, failuresOnIssuer: 2 }));
		expect(issuerIndex(issued, 2)).toBe(0);
		expect(issued.failuresOnIssuer).toBe(0);
	});

	it("an index past a shortened list points at its last issuer", () => {
		expect(issuerIndex(state({ issuerIndex: 3 }), 2)).toBe(1);
	});

	it("an attempt is counted before it is placed; orders older than a day drop out", () => {
		const now = new Date("2026-03-02T12:00:00Z");
		const started = attemptStarted(
			state({ orders: ["2026-03-01T11:00:00.000Z", "2026-03-02T01:00:00.000Z"] }),
			now,
		);
		expect(started.lastAttemptAt).toBe(now.toISOString());
		expect(started.orders).toEqual(["2026-03-02T01:00:00.000Z", now.toISOString()]);
	});
});
