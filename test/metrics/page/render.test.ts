/**
 * The fleet page rendered directly (no HTTP, time passed in): every string from configuration or endpoints is
 * escaped, the timeline's geometry follows notBefore → now → notAfter and the renewal point, and each section
 * shows the status document's numbers.
 */
import { describe, expect, it } from "vitest";
import { escapeHtml, html, raw } from "../../../src/metrics/page/escape.js";
import { reloadFacts, removedRefs, targetFacts } from "../../../src/metrics/page/facts.js";
import { renderPage } from "../../../src/metrics/page/layout.js";
import { timelineGeometry, timelineSvg } from "../../../src/metrics/page/timeline.js";
import { fixture, NOW } from "./fixture.js";

describe("escaping", () => {
	it("escapes the five HTML specials, in text and attributes", () => {
		expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe(
			"&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;",
		);
		expect(html`<p title="${`" onmouseover="x`}">${"<b>"}</p>`.markup).toBe(
			'<p title="&quot; onmouseover=&quot;x">&lt;b&gt;</p>',
		);
	});

	it("keeps markup built by html and raw; joins arrays; renders nothing for false, null and undefined", () => {
		const items = ["<1>", "2"].map((x) => html`<li>${x}</li>`);
		expect(html`<ul>${items}</ul>${false}${null}${undefined}${raw("<hr>")}${0}`.markup).toBe(
			"<ul><li>&lt;1&gt;</li><li>2</li></ul><hr>0",
		);
	});

	it("the whole page carries no hostile string unescaped: names, error texts and problems alike", () => {
		const page = renderPage(fixture(), { now: NOW, refreshSeconds: 5 });
		expect(page).not.toContain("<img");
		expect(page).not.toContain(`onerror="`);
		expect(page).toContain("&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;&amp;");
		// Only our own inline script, once.
		expect(page.match(/<script>/g)).toHaveLength(1);
	});
});

describe("timeline geometry", () => {
	const day = (d: number) => new Date(Date.UTC(2026, 0, 1) + d * 86_400_000);
	it.each([
		// [now (day), renewal (day), phase, now x, renewal x]: a 100-day life drawn on 230 px from x = 5.
		[0, 66, "valid", 5, 156.8],
		[50, 66, "valid", 120, 156.8],
		[70, 66, "renewal-due", 166, 156.8],
		[100, 66, "expired", 235, 156.8],
		[150, 66, "expired", 235, 156.8],
		[-10, 66, "not-yet-valid", 5, 156.8],
	] as const)(
		"now at day %d, renewal at day %d: %s, now at x=%d, renewal at x=%d",
		(now, renew, phase, nowX, renewX) => {
			const g = timelineGeometry({
				notBefore: day(0),
				notAfter: day(100),
				now: day(now),
				renewAt: day(renew),
			});
			expect(g).toMatchObject({ phase, nowX, renewX, bar: { x: 5, width: 230 } });
			// The elapsed part ends at now, inside the bar.
			expect(g.elapsed).toBeCloseTo(nowX - 5, 5);
			expect(g.elapsed).toBeGreaterThanOrEqual(0);
			expect(g.elapsed).toBeLessThanOrEqual(g.bar.width);
		},
	);

	it("without a renewal point (a directory source's certificate) no diamond is drawn", () => {
		const t = { notBefore: day(0), notAfter: day(100), now: day(50) };
		expect(timelineGeometry(t).renewX).toBeUndefined();
		expect(timelineSvg(t).markup).not.toContain('class="renew"');
		expect(timelineSvg({ ...t, renewAt: day(66) }).markup).toContain('<path class="renew" d="M156.8 ');
	});

	it("the SVG says in words what it draws (title and aria-label)", () => {
		const svg = timelineSvg({ notBefore: day(0), notAfter: day(100), now: day(50), renewAt: day(66) }).markup;
		expect(svg).toContain('data-phase="valid"');
		expect(svg).toContain(
			"<title>valid 2026-01-01T00:00:00.000Z to 2026-04-11T00:00:00.000Z; expires in 50 d;",
		);
		expect(svg).toContain('<line class="now" x1="120" x2="120"');
	});
});

describe("sections", () => {
	const doc = fixture();
	const page = renderPage(doc, { now: NOW, refreshSeconds: 7 });

	it("facts: per target converged/total, removed duplicates counted once per ref, reloads caused", () => {
		expect(targetFacts(doc)).toEqual([
			{ target: "lb1", kind: "haproxy-runtime", converged: 1, total: 1 },
			{ target: "lb-down", kind: "haproxy-runtime", converged: 0, total: 1 },
		]);
		expect(removedRefs(doc)).toEqual([{ target: "lb1", endpoint: "lb1", ref: "old_shop.pem" }]);
		expect(reloadFacts(doc)).toEqual([
			expect.objectContaining({ endpoint: "lb1", op: "storage-delete", reloadId: "r7" }),
		]);
	});

	it("overview numbers, per certificate and target cells, and the failing endpoint's error and hint", () => {
		const stat = (key: string) => page.match(new RegExp(`data-stat="${key}">([^<]*)<`))?.[1];
		expect([stat("certificates"), stat("endpoints"), stat("failing"), stat("duplicates")]).toEqual([
			"2",
			"1/2",
			"1",
			"1",
		]);
		expect([stat("removed"), stat("reloads")]).toEqual(["1", "1"]);
		expect(page).toMatch(/data-cert="shop" data-target="lb1"[^>]*>1\/1</);
		expect(page).toMatch(/data-cert="shop" data-target="lb-down"[^>]*>0\/1</);
		expect(page).toMatch(/data-target-converged="lb-down">0\/1</);
		const down = page.slice(page.indexOf('data-endpoint="lb-down"'));
		expect(down).toContain("ENDPOINT_UNAVAILABLE: cannot connect: &lt;img");
		expect(down).toContain('<div class="hint">start it</div>');
		expect(page).toContain('data-removed="old_shop.pem"');
		expect(page).toContain("(reload r7)");
	});

	it("a timeline per certificate, refresh with and without JavaScript, and a waiting page before any cycle", () => {
		expect(page.match(/<svg class="timeline/g)).toHaveLength(2);
		expect(page).toContain('<noscript><meta http-equiv="refresh" content="7"></noscript>');
		expect(page).toContain('<body data-refresh="7">');
		expect(page).toContain('<main data-cycle="2026-03-01T00:00:00.000Z">');
		const waiting = renderPage(undefined, { now: NOW, refreshSeconds: 7 });
		expect(waiting).toContain("Waiting for the first cycle");
		expect(waiting).toContain('<main data-cycle="">');
	});

	it("a reload budget, when the report has one: budget, last hour's reloads, this cycle and the breaker", () => {
		expect(page).not.toContain("Reload budget");
		expect(page).not.toContain('data-stat="reloads-hour"');
		const withBudget = fixture();
		const lb1 = withBudget.targets[0]?.endpoints[0];
		if (!lb1) throw new Error("fixture without lb1");
		Object.assign(lb1, {
			reloads: {
				budget: { maxPerHour: 2, used: 2, remaining: 0, nextAt: "2026-03-01T00:40:00.000Z" },
				recent: [
					{ at: "2026-02-28T23:40:00.000Z", reasons: ["new-certificate"], result: "ok" },
					{ at: "2026-02-28T23:50:00.000Z", reasons: ["too-large"], result: "not-served" },
				],
				cycle: {
					decision: "held",
					reasons: ["new-certificate"],
					code: "RELOAD_BUDGET_SPENT",
					message: `<b>spent</b>`,
				},
				breaker: { openedAt: "2026-02-28T23:50:00.000Z", code: "RELOAD_FAILED", message: "probe disagrees" },
			},
		});
		const out = renderPage(withBudget, { now: NOW, refreshSeconds: 7 });
		expect(out).toMatch(/data-stat="reloads-hour">2</);
		const row = out.slice(out.indexOf('data-budget="lb1"'));
		expect(row).toContain("2 of 2 used in the last hour, 0 left; next at 2026-03-01T00:40:00.000Z");
		expect(row).toContain(
			"this cycle: held for new-certificate: RELOAD_BUDGET_SPENT: &lt;b&gt;spent&lt;/b&gt;",
		);
		expect(row).toContain("2026-02-28T23:50:00.000Z: too-large → not-served");
		expect(row).toContain("breaker open since 2026-02-28T23:50:00.000Z: RELOAD_FAILED: probe disagrees");
	});
});
