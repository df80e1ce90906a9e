/** The reload-budget decision, as a table: pure, time passed in, no I/O. */
import { describe, expect, it } from "vitest";
import type { StepView } from "../../../../src/reconcile/report.js";
import {
	type BreakerState,
	breakerCloses,
	budgetView,
	decideReload,
	type ReloadNeed,
	type ReloadRecord,
	reloadsInWindow,
} from "../../../../src/targets/haproxy/engine/reload-budget.js";
import { reloadNeedsOf } from "../../../../src/targets/haproxy/engine/reload-step.js";

const NOW = new Date("2026-12-02T12:00:00Z");
const ago = (minutes: number): string => new Date(NOW.getTime() - minutes * 60_000).toISOString();
const done = (minutes: number, result: ReloadRecord["result"] = "ok"): ReloadRecord => ({
	at: ago(minutes),
	reasons: ["too-large"],
	result,
});
const big: ReloadNeed = { ref: "big.pem", certificate: "big", reason: "too-large" };
const fresh: ReloadNeed = { ref: "new.pem", certificate: "new", reason: "new-certificate" };
const breaker: BreakerState = { openedAt: ago(5), code: "RELOAD_FAILED", message: "show proc: failed 1" };

describe("decideReload", () => {
	const table: Array<{
		name: string;
		max: number;
		history?: ReloadRecord[];
		needs?: ReloadNeed[];
		breaker?: BreakerState;
		durable?: boolean;
		want: string;
		message?: RegExp;
	}> = [
		{ name: "nothing needs a reload", max: 5, needs: [], want: "none" },
		{ name: "nothing needs a reload, even at 0", max: 0, needs: [], want: "none" },
		{ name: "max_per_hour 0: never, reported", max: 0, want: "RELOAD_DISABLED", message: /max_per_hour: 0/ },
		{ name: "budget 1, none used", max: 1, want: "reload" },
		{
			name: "budget 1, one in the last hour",
			max: 1,
			history: [done(59)],
			want: "RELOAD_BUDGET_EXHAUSTED",
			message: /1 of 1 reloads in the last hour; the next is allowed at 2026-12-02T12:01:00.000Z/,
		},
		{
			name: "budget 1, the last one 61 minutes ago (the hour slides)",
			max: 1,
			history: [done(61)],
			want: "reload",
		},
		{
			name: "a failed reload counts too",
			max: 1,
			history: [done(10, "failed")],
			want: "RELOAD_BUDGET_EXHAUSTED",
		},
		{ name: "budget 3, two used", max: 3, history: [done(1), done(30), done(90)], want: "reload" },
		{
			name: "the breaker wins over a budget left",
			max: 5,
			breaker,
			want: "RELOAD_BREAKER_OPEN",
			message: /breaker is open since/,
		},
		{
			name: "a failed storage write holds the reload",
			max: 5,
			durable: false,
			want: "RELOAD_WRITES_NOT_DURABLE",
		},
		{
			name: "disabled wins over the breaker (it never reloads anyway)",
			max: 0,
			breaker,
			want: "RELOAD_DISABLED",
		},
	];
	for (const row of table) {
		it(row.name, () => {
			const d = decideReload({
				now: NOW,
				maxPerHour: row.max,
				history: row.history ?? [],
				needs: row.needs ?? [big, fresh],
				writesDurable: row.durable ?? true,
				...(row.breaker ? { breaker: row.breaker } : {}),
			});
			expect(d.action === "hold" ? d.code : d.action).toBe(row.want);
			if (d.action === "hold") {
				expect(d.message).toMatch(/^pending a reload \(new-certificate: new\.pem; too-large: big\.pem\): /);
				if (row.message) expect(d.message).toMatch(row.message);
			}
			if (d.action !== "none") expect(d.reasons).toEqual(["new-certificate", "too-large"]);
		});
	}
});

describe("budget window", () => {
	it("counts only the reloads of the last hour, never future-dated ones", () => {
		const future = { ...done(0), at: new Date(NOW.getTime() + 60_000).toISOString() };
		expect(reloadsInWindow([done(0), done(59), done(60), done(61), future], NOW)).toEqual([
			done(0),
			done(59),
		]);
	});

	it("remaining and when the next reload is allowed", () => {
		expect(budgetView(2, [done(50), done(20)], NOW)).toEqual({
			maxPerHour: 2,
			used: 2,
			remaining: 0,
			nextAt: "2026-12-02T12:10:00.000Z",
		});
		expect(budgetView(2, [done(20)], NOW)).toEqual({ maxPerHour: 2, used: 1, remaining: 1 });
		expect(budgetView(0, [], NOW)).toEqual({ maxPerHour: 0, used: 0, remaining: 0 });
	});
});

describe("breaker", () => {
	it("closes only on probes that all match; without a probe nothing proves it", () => {
		expect(breakerCloses([{ match: true }, { match: true }])).toBe(true);
		expect(breakerCloses([{ match: true }, { match: false }])).toBe(false);
		expect(breakerCloses([])).toBe(false);
	});
});

describe("reloadNeedsOf", () => {
	const step = (s: Partial<StepView> & Pick<StepView, "op" | "ref">): StepView => ({ why: "stale", ...s });
	it("planned new files and steps the driver could not hot-swap, only when their storage write is durable", () => {
		const steps = [
			step({ op: "storage-replace", ref: "big.pem", result: "ok" }),
			step({
				op: "runtime-set",
				ref: "big.pem",
				certificate: "big",
				result: "failed",
				reloadNeeded: "too-large",
			}),
			step({ op: "storage-create", ref: "new.pem", result: "ok" }),
			step({ op: "storage-create", ref: "lost.pem", result: "failed" }),
		];
		const planned: ReloadNeed[] = [
			fresh,
			{ ref: "lost.pem", certificate: "lost", reason: "new-certificate" },
		];
		expect(reloadNeedsOf(planned, steps)).toEqual([fresh, big]);
	});
});
