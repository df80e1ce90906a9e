import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
	earliestRenewal,
	type RenewalDeps,
	type RenewalReport,
	runRenewal,
} from "../../src/renewal/manager.js";
import { certificateSpecSchema } from "../../src/renewal/schema.js";
import { createLocalCaIssuer, localCaSourceSchema } from "../../src/sources/local-ca/index.js";
import type { Issuer } from "../../src/sources/types.js";
import { type FileStore, openFileStore } from "../../src/store/file-store.js";
import { readCertificateRecord, readRenewalRecord } from "../../src/store/records.js";
import { stateAt } from "../harness/state.js";

const run = promisify(execFile);
const MIN = 60_000;
const HOUR = 60 * MIN;
const signal = new AbortController().signal;

let dir: string;
let store: FileStore;
/** The one clock of the scenario: the manager and the local CA both read it. */
let now: Date;
const t0 = new Date("2026-03-01T12:00:00Z");
const at = (ms: number) => new Date(t0.getTime() + ms);

beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-renewal-"));
	store = await openFileStore(join(dir, "state"));
	now = t0;
});
afterEach(async () => {
	store.close();
	await rm(dir, { recursive: true, force: true });
});

/** The local CA over the test's store, or over the store of another state directory. */
function localCa(stateDir?: string): Issuer & { exportRoot(): Promise<string> } {
	return createLocalCaIssuer(localCaSourceSchema.parse({ name: "local", type: "local-ca" }), {
		store: stateDir === undefined ? store : stateAt(stateDir),
		clock: () => now,
	});
}

const web = certificateSpecSchema.parse({
	name: "web",
	domains: ["web.test", "www.web.test"],
	issuer: "local",
	lifetime: "1d",
});
const api = certificateSpecSchema.parse({
	name: "api",
	domains: ["api.test"],
	issuer: "local",
	lifetime: "1d",
});

function deps(issuer: Issuer, certificates = [web]): RenewalDeps {
	return { store, issuers: new Map([["local", issuer]]), certificates };
}

async function cycle(d: RenewalDeps, when: Date): Promise<RenewalReport> {
	now = when;
	let draws = 0;
	return runRenewal(d, { now: when, random: () => [0.5, 0.25, 0.75][draws++ % 3] ?? 0.5, signal });
}

const statusOf = (r: RenewalReport, name = "web") => r.statuses.find((s) => s.name === name)!;
const serialOf = (r: RenewalReport, name = "web") =>
	r.certificates.find((c) => c.name === name)?.bundle.leaf.serial;

describe("renewal/manager", () => {
	it("issues once, orders nothing while not due, renews when due; the chain verifies with openssl", async () => {
		const ca = localCa();
		const first = await cycle(deps(ca, [web, api]), t0);
		expect(first.statuses.map((s) => [s.name, s.ordered, s.decision.reason])).toEqual([
			["web", true, "Scheduled"],
			["api", true, "Scheduled"],
		]);
		expect(first.problems).toEqual([]);
		expect(statusOf(first).orderedBecause?.reason).toBe("NotIssued");
		expect(first.certificates.map((c) => c.names)).toEqual([["web.test", "www.web.test"], ["api.test"]]);
		// 1-day lifetime (under 10 days: renewed at half): the window opens 12 h in; the stored jitter (0.5 or
		// 0.25) moves it by up to 12h/3.
		const next = Date.parse(statusOf(first).nextRenewalAt);
		expect(next).toBeGreaterThanOrEqual(at(12 * HOUR).getTime());
		expect(next).toBeLessThan(at(12 * HOUR + (12 * HOUR) / 3).getTime());
		const earliest = Math.min(...first.statuses.map((s) => Date.parse(s.nextRenewalAt)));
		expect(earliestRenewal(first.statuses)?.getTime()).toBe(earliest);
		expect(earliestRenewal([])).toBeUndefined();
		const stored = await readRenewalRecord(store, "web");
		expect(stored?.value.renewAt).toBe(statusOf(first).nextRenewalAt);

		const second = await cycle(deps(ca, [web, api]), at(MIN));
		expect(second.statuses.map((s) => s.ordered)).toEqual([false, false]);
		expect(serialOf(second)).toBe(serialOf(first));
		expect(statusOf(second).decision.reason).toBe("Scheduled");

		const third = await cycle(deps(ca, [web, api]), at(19 * HOUR));
		expect(third.statuses.map((s) => s.orderedBecause?.reason)).toEqual(["Due", "Due"]);
		expect(serialOf(third)).not.toBe(serialOf(first));
		const record = await readCertificateRecord(store, "web");
		expect(record?.value.history.map((h) => h.serial)).toEqual([serialOf(third), serialOf(first)]);

		const cert = third.certificates[0]!.bundle;
		await writeFile(join(dir, "root.pem"), await ca.exportRoot());
		await writeFile(join(dir, "leaf.pem"), cert.certPem);
		const { stdout } = await run("openssl", [
			"verify",
			"-attime",
			String(Math.floor(now.getTime() / 1000)),
			"-CAfile",
			join(dir, "root.pem"),
			join(dir, "leaf.pem"),
		]);
		expect(stdout).toContain(": OK");
	});

	it("a 6-day certificate: renewed at half its lifetime; with its CA down, retried at least hourly, in time", async () => {
		const six = certificateSpecSchema.parse({
			name: "web",
			domains: ["web.test"],
			issuer: "local",
			lifetime: "6d",
		});
		const good = localCa();
		const first = await cycle(deps(good, [six]), t0);
		const DAY = 24 * HOUR;
		const notAfter = Date.parse(statusOf(first).notAfter ?? "");
		const due = Date.parse(statusOf(first).nextRenewalAt);
		// Half of 6 days left, plus the jitter's share (up to a third of the window).
		expect(notAfter - due).toBeLessThanOrEqual(3 * DAY);
		expect(notAfter - due).toBeGreaterThanOrEqual(2 * DAY);
		expect(statusOf(first).retryIntervalMs).toBe(HOUR);

		await writeFile(join(dir, "blocked"), "not a directory");
		const broken = localCa(join(dir, "blocked", "state"));
		// The daemon wakes at each nextRenewalAt: follow it until the CA comes back, 2 days after the due time.
		let when = new Date(due);
		let report = await cycle(deps(broken, [six]), when);
		const gaps: number[] = [];
		while (when.getTime() < due + 2 * DAY) {
			const next = Date.parse(statusOf(report).nextRenewalAt);
			gaps.push(next - when.getTime());
			when = new Date(Math.max(next, when.getTime() + MIN));
			report = await cycle(deps(broken, [six]), when);
		}
		expect(statusOf(report).failures).toBeGreaterThan(40);
		expect(Math.max(...gaps)).toBeLessThanOrEqual(HOUR);
		expect(serialOf(report)).toBe(serialOf(first));
		const back = await cycle(deps(good, [six]), new Date(Date.parse(statusOf(report).nextRenewalAt)));
		expect(statusOf(back)).toMatchObject({ ordered: true, failures: 0, state: "issued" });
		expect(serialOf(back)).not.toBe(serialOf(first));
		expect(now.getTime()).toBeLessThan(notAfter);
	});

	it("backs off after failures (which the daily cap does not count) and keeps the current certificate desired", async () => {
		const good = localCa();
		await cycle(deps(good), t0);
		const renewed = await cycle(deps(good), at(19 * HOUR));
		const servedSerial = serialOf(renewed);
		expect(statusOf(renewed).ordered).toBe(true);

		// The same issuer, now unable to reach its CA directory (a file stands where the directory should be).
		await writeFile(join(dir, "blocked"), "not a directory");
		const broken = localCa(join(dir, "blocked", "state"));
		const t1 = at(19 * HOUR + 19 * HOUR); // renewal due again
		const backoffs: number[] = [];
		let when = t1;
		let report = await cycle(deps(broken), when);
		for (let i = 0; i < 3; i++) {
			const s = statusOf(report);
			expect(s.ordered).toBe(true);
			expect(s.failures).toBe(i + 1);
			expect(s.lastError?.code).toBe("ISSUE_FAILED");
			expect(serialOf(report)).toBe(servedSerial);
			expect(report.problems.map((p) => p.error.code)).toEqual(["ISSUE_FAILED"]);
			backoffs.push(Date.parse(s.nextRenewalAt) - when.getTime());
			// Halfway through the backoff nothing is ordered.
			const waiting = await cycle(deps(broken), new Date(when.getTime() + backoffs[i]! / 2));
			expect(statusOf(waiting)).toMatchObject({ ordered: false, failures: i + 1 });
			expect(statusOf(waiting).decision.reason).toBe("Backoff");
			when = new Date(Date.parse(s.nextRenewalAt));
			report = await cycle(deps(broken), when);
		}
		expect(backoffs).toEqual([MIN, 2 * MIN, 4 * MIN]);
		// The daily cap counts successful orders only (the renewal at 19 h): failures are paced by backoff.
		const last = statusOf(report);
		expect(last).toMatchObject({ ordered: true, failures: 4, breakerOpen: false });
		expect(last.decision.reason).toBe("Backoff");
		expect(serialOf(report)).toBe(servedSerial);
		const state = await readRenewalRecord(store, "web");
		expect(state?.value.orders).toHaveLength(1);
		expect(state?.value.lastError?.retryable).toBe(true);
	});

	it("runs at most `concurrency` orders at once", async () => {
		const ca = localCa();
		let inFlight = 0;
		let peak = 0;
		// The real local CA, slowed down so orders overlap.
		const slow: Issuer = {
			name: "local",
			async issue(request, s) {
				inFlight += 1;
				peak = Math.max(peak, inFlight);
				try {
					await new Promise((r) => setTimeout(r, 40));
					return await ca.issue(request, s);
				} finally {
					inFlight -= 1;
				}
			},
		};
		const specs = [1, 2, 3, 4, 5, 6].map((i) =>
			certificateSpecSchema.parse({ name: `c${i}`, domains: [`c${i}.test`], issuer: "local" }),
		);
		const report = await cycle({ ...deps(slow, specs), settings: { concurrency: 2 } }, t0);
		expect(report.certificates).toHaveLength(6);
		expect(peak).toBe(2);
	});

	it("follows the issuer's ARI window when it offers one, and the configured window when ARI fails", async () => {
		const ca = localCa();
		let ari: "window" | "down" = "window";
		// The real local CA plus a renewal window, as an ACME CA with ARI would suggest it.
		const withAri: Issuer = {
			name: "local",
			issue: (request, s) => ca.issue(request, s),
			async renewalWindow() {
				if (ari === "down") throw new Error("renewalInfo endpoint unreachable");
				return { start: at(2 * HOUR), end: at(3 * HOUR) };
			},
		};
		const first = await cycle(deps(withAri), t0);
		const waiting = await cycle(deps(withAri), at(HOUR));
		expect(statusOf(waiting).decision.reason).toBe("AriWindow");
		// The jitter stored with the certificate is the second draw, 0.25.
		expect(Date.parse(statusOf(waiting).nextRenewalAt)).toBe(at(2.25 * HOUR).getTime());
		ari = "down";
		const fallback = await cycle(deps(withAri), at(3 * HOUR));
		expect(statusOf(fallback)).toMatchObject({ ordered: false });
		expect(statusOf(fallback).decision.reason).toBe("Scheduled");
		ari = "window";
		const renewed = await cycle(deps(withAri), at(3 * HOUR));
		expect(statusOf(renewed).orderedBecause?.reason).toBe("Due");
		expect(serialOf(renewed)).not.toBe(serialOf(first));
	});

	it("reports an unknown issuer for its certificate without stopping the others", async () => {
		const ca = localCa();
		const lost = certificateSpecSchema.parse({ name: "lost", domains: ["l.test"], issuer: "nowhere" });
		const report = await cycle(deps(ca, [lost, web]), t0);
		expect(report.certificates.map((c) => c.name)).toEqual(["web"]);
		expect(statusOf(report, "lost").lastError?.code).toBe("CONFIG_INVALID");
	});

	it("orders at once when the configured names change, serving the old certificate meanwhile", async () => {
		const ca = localCa();
		const first = await cycle(deps(ca), t0);
		const wider = { ...web, domains: [...web.domains, "new.web.test"] };
		const report = await cycle(deps(ca, [wider]), at(MIN));
		expect(statusOf(report)).toMatchObject({ ordered: true });
		expect(statusOf(report).orderedBecause?.reason).toBe("Mismatch");
		expect(statusOf(report).orderedBecause?.message).toMatch(/names changed/);
		expect(report.certificates[0]?.names).toContain("new.web.test");
		expect(serialOf(report)).not.toBe(serialOf(first));
	});
});

describe("renewal/manager: the issue lock (one order per certificate across replicas)", () => {
	/** Counts the orders that reach the issuer. */
	function counting(issuer: Issuer): Issuer & { orders: () => number } {
		let orders = 0;
		return {
			...issuer,
			async issue(...args: Parameters<Issuer["issue"]>) {
				orders++;
				return issuer.issue(...args);
			},
			orders: () => orders,
		};
	}

	it("orders nothing while another process holds the lock, and says an order is in flight", async () => {
		const ca = counting(localCa());
		let asked = 0;
		const report = await cycle(
			{
				...deps(ca),
				issueLock: async () => {
					asked++;
					return undefined;
				},
			},
			t0,
		);
		expect(asked).toBe(1);
		expect(ca.orders()).toBe(0);
		expect(statusOf(report).state).toBe("ordering");
		expect(report.certificates).toHaveLength(0);
	});

	it("decides again under the lock: an order another process completed meanwhile is not repeated", async () => {
		const ca = counting(localCa());
		// The other replica: its own manager over the same store, ordering while we wait for the lock.
		const other = counting(localCa());
		let released = 0;
		const report = await cycle(
			{
				...deps(ca),
				issueLock: async () => {
					await runRenewal(deps(other), { now: t0, random: () => 0.5, signal });
					return {
						release: async () => {
							released++;
						},
					};
				},
			},
			t0,
		);
		expect(other.orders()).toBe(1);
		expect(ca.orders()).toBe(0);
		expect(released).toBe(1);
		expect(serialOf(report)).toBe((await readCertificateRecord(store, "web"))!.value.history[0]!.serial);
	});

	it("orders under the lock when nobody else did, and releases it", async () => {
		const ca = counting(localCa());
		let released = 0;
		const report = await cycle(
			{ ...deps(ca), issueLock: async () => ({ release: async () => void released++ }) },
			t0,
		);
		expect(ca.orders()).toBe(1);
		expect(released).toBe(1);
		expect(serialOf(report)).toBeDefined();
	});
});
