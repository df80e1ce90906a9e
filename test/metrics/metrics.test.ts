/**
 * The daemon in-process (runDaemon + buildEngine) on a real HAProxy: a directory source, a haproxy-runtime
 * target with legacy duplicates, an unmanaged ref and a refused renewal, plus a target whose socket does not
 * exist. After each cycle, /metrics and /readyz are scraped and compared with what HAProxy really holds, and
 * the reload-safety invariant is checked (the tests are one story: it runs at the end of each cycle's test).
 */
import { X509Certificate } from "node:crypto";
import { EventEmitter } from "node:events";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { buildEngine } from "../../src/daemon/engine.js";
import { type Engine, runDaemon } from "../../src/daemon/loop.js";
import { createLogger } from "../../src/log.js";
import { createMetrics } from "../../src/metrics/index.js";
import type { CycleReport } from "../../src/reconcile/report.js";
import { createTestCa, issueTestLeaf, type TestLeaf } from "../harness/certs.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { assertReloadSafe } from "../harness/invariant.js";
import { expectNoKeyMaterial } from "../harness/no-secrets.js";
import { parseScrape } from "../harness/scrape.js";

const seconds = (pem: string) => Date.parse(new X509Certificate(pem).validTo) / 1000;
const sample = (name: string, labels: Record<string, string>) =>
	`${name}{${Object.entries(labels)
		.map(([k, v]) => `${k}="${v}"`)
		.join(",")}}`;

const dir = mkdtempSync(join(tmpdir(), "certificatee-metrics-"));
const sourceDir = join(dir, "source");
let h: Haproxy;
let keeper: TestLeaf;
let legacy: TestLeaf;
let oldKeeper: TestLeaf;
let shopWide: TestLeaf;
let shopNarrow: TestLeaf;
let shopRenewed: TestLeaf;
let other: TestLeaf;
const signals = new EventEmitter();
const cycles: CycleReport[] = [];
const waiters: Array<() => void> = [];
let releaseFirstCycle: () => void = () => {};
let address = "";
let daemon: Promise<void> | undefined;

function putSource(file: string, pem: string) {
	const tmp = join(sourceDir, `.${file}.tmp`);
	writeFileSync(tmp, pem, { mode: 0o600 });
	renameSync(tmp, join(sourceDir, file));
}

function nextCycle(): Promise<CycleReport> {
	const seen = cycles.length;
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error("no cycle within 15 s")), 15_000);
		waiters.push(() => {
			if (cycles.length > seen) {
				clearTimeout(timer);
				resolve(cycles[seen] as CycleReport);
			}
		});
	});
}

async function scrape(): Promise<{ text: string; samples: Map<string, number> }> {
	const res = await fetch(`http://${address}/metrics`);
	expect(res.status).toBe(200);
	const text = await res.text();
	return { text, samples: parseScrape(text) };
}

async function readyz(): Promise<{ status: number; body: Record<string, unknown>; text: string }> {
	const res = await fetch(`http://${address}/readyz`);
	const text = await res.text();
	return { status: res.status, body: JSON.parse(text) as Record<string, unknown>, text };
}

beforeAll(async () => {
	const ca = await createTestCa("metrics CA");
	const names = ["barsone.test", "www.barsone.test"];
	keeper = await issueTestLeaf(ca, { names });
	legacy = await issueTestLeaf(ca, { names });
	oldKeeper = await issueTestLeaf(ca, { names: ["old.test"] });
	const oldLegacy = await issueTestLeaf(ca, { names: ["old.test"] });
	shopWide = await issueTestLeaf(ca, { names: ["shop.test", "www.shop.test"] });
	shopNarrow = await issueTestLeaf(ca, { names: ["shop.test"] });
	shopRenewed = await issueTestLeaf(ca, {
		names: ["shop.test", "www.shop.test"],
		notAfter: new Date(Date.now() + 40 * 86_400_000),
	});
	other = await issueTestLeaf(ca, { names: ["other.test"] });
	h = await startHaproxy({
		crtDir: {
			"barsone.pem": keeper.combinedPem,
			"legacy_barsone.pem": legacy.combinedPem,
			"old.pem": oldKeeper.combinedPem,
			"legacy_old.pem": oldLegacy.combinedPem,
			"shop.pem": shopWide.combinedPem,
			"other.pem": other.combinedPem,
		},
	});
	// An older tool removed this duplicate's file; HAProxy still holds it (deleted, pending reload).
	rmSync(join(h.crtDir, "legacy_old.pem"));

	const { mkdirSync } = await import("node:fs");
	mkdirSync(sourceDir, { mode: 0o700 });
	putSource("barsone.pem", keeper.combinedPem);
	putSource("old.pem", oldKeeper.combinedPem);
	// The source dropped www.shop.test: certificatee refuses to push it (ref_in_sync 0).
	putSource("shop.pem", shopNarrow.combinedPem);

	const loaded = parseConfig(
		{
			state_dir: join(dir, "state"),
			interval: "1h",
			listen: "127.0.0.1:0",
			sources: [{ name: "files", type: "directory", path: sourceDir, debounce: "100ms" }],
			targets: [
				{ name: "lb1", type: "haproxy-runtime", socket: h.adminSocket, crt_dir: h.crtDir, probe: h.address },
				{
					name: "lb-gone",
					type: "haproxy-runtime",
					socket: join(dir, "no-such.sock"),
					crt_dir: join(dir, "no-such-dir"),
				},
			],
		},
		"(test)",
		{ env: {} },
	);
	const metrics = createMetrics();
	const log = createLogger({ level: "silent" });
	const gate = new Promise<void>((resolve) => {
		releaseFirstCycle = resolve;
	});
	const listening = new Promise<string>((resolve) => {
		daemon = runDaemon({
			loadConfig: () => loaded,
			build: async (config): Promise<Engine> => {
				const engine = await buildEngine(config, { log, readOnly: false, metrics });
				return {
					...engine,
					deps: {
						...engine.deps,
						loadDesired: async (signal) => {
							await gate;
							return engine.deps.loadDesired(signal);
						},
					},
					afterCycle(report) {
						engine.afterCycle?.(report);
						cycles.push(report);
						for (const w of waiters.splice(0)) w();
					},
				};
			},
			metrics,
			log,
			signals,
			onListening: resolve,
		});
	});
	address = await listening;
}, 30_000);

afterAll(async () => {
	signals.emit("SIGTERM");
	releaseFirstCycle();
	await daemon;
	await h?.stop();
	rmSync(dir, { recursive: true, force: true });
});

const lb1 = { target: "lb1", endpoint: "lb1" };

describe("metrics and health of the daemon on a real HAProxy", () => {
	it("/healthz answers at once; /readyz is 503 until the first cycle finished; /metrics has no state yet", async () => {
		expect((await fetch(`http://${address}/healthz`)).status).toBe(200);
		const r = await readyz();
		expect(r.status).toBe(503);
		expect(r.body).toMatchObject({ ready: false, failedEndpoints: [] });
		const { samples } = await scrape();
		expect([...samples.keys()].some((k) => k.startsWith("certificatee_endpoint_up"))).toBe(false);
	});

	it("cycle 1: duplicates found and deleted, pending_reload counted, shop refused (0), reloads 0", async () => {
		const pid = await h.workerPid();
		const started = Date.now() / 1000;
		const first = nextCycle();
		releaseFirstCycle();
		await first;
		// HAProxy's real state: both duplicates gone from runtime, the remaining one from storage too.
		const shown = await h.command("show ssl cert");
		expect(shown).not.toContain("legacy_barsone.pem");
		expect(shown).not.toContain("legacy_old.pem");
		expect(existsSync(join(h.crtDir, "legacy_barsone.pem"))).toBe(false);

		const { text, samples } = await scrape();
		const dup = (state: string) => samples.get(sample("certificatee_legacy_duplicates", { ...lb1, state }));
		expect(dup("found")).toBe(2);
		expect(dup("deleted")).toBe(2);
		expect(dup("pending_reload")).toBe(1);
		expect(dup("ambiguous")).toBe(0);
		const inSync = (certificate: string) =>
			samples.get(sample("certificatee_ref_in_sync", { ...lb1, certificate }));
		expect(inSync("barsone")).toBe(1);
		expect(inSync("old")).toBe(1);
		expect(inSync("shop")).toBe(0);
		// shop.pem still holds the wide certificate: the refused one was never pushed.
		expect(new X509Certificate(readFileSync(join(h.crtDir, "shop.pem"))).serialNumber).toBe(
			new X509Certificate(shopWide.certPem).serialNumber,
		);
		const op = (operation: string, result = "ok") =>
			samples.get(sample("certificatee_sync_operations_total", { ...lb1, operation, result })) ?? 0;
		expect(op("crt-list-remove")).toBe(2);
		expect(op("runtime-delete")).toBe(2);
		expect(op("storage-delete")).toBe(1);
		expect(op("runtime-set")).toBe(0);
		expect([...samples.keys()].filter((k) => k.startsWith("certificatee_reloads_caused_total"))).toEqual([]);

		expect(samples.get(sample("certificatee_endpoint_up", lb1))).toBe(1);
		expect(samples.get(sample("certificatee_endpoint_up", { target: "lb-gone", endpoint: "lb-gone" }))).toBe(
			0,
		);
		const last = samples.get(sample("certificatee_endpoint_last_success_timestamp_seconds", lb1)) ?? 0;
		expect(last).toBeGreaterThanOrEqual(Math.floor(started));
		expect(last).toBeLessThanOrEqual(Date.now() / 1000 + 1);
		expect(
			samples.has(
				sample("certificatee_endpoint_last_success_timestamp_seconds", {
					target: "lb-gone",
					endpoint: "lb-gone",
				}),
			),
		).toBe(false);

		// Expiries: desired certificates, and every ref HAProxy holds (the unmanaged one too).
		expect(
			samples.get(sample("certificatee_certificate_not_after_timestamp_seconds", { certificate: "barsone" })),
		).toBe(seconds(keeper.certPem));
		expect(
			samples.get(
				sample("certificatee_ref_not_after_timestamp_seconds", {
					...lb1,
					ref: "other.pem",
					class: "unmanaged",
				}),
			),
		).toBe(seconds(other.certPem));
		expect(
			samples.get(
				sample("certificatee_ref_not_after_timestamp_seconds", { ...lb1, ref: "shop.pem", class: "refused" }),
			),
		).toBe(seconds(shopWide.certPem));
		// The duplicates deleted this cycle are gone from HAProxy, so from the expiry gauge too.
		const refSeries = [...samples.keys()].filter((k) => k.startsWith("certificatee_ref_not_after"));
		expect(refSeries.filter((k) => k.includes("legacy_"))).toEqual([]);
		// Four in crt_dir, plus the bind's default certificate (outside crt_dir: observed, never written).
		expect(refSeries).toHaveLength(5);
		expect(samples.get('certificatee_cycle_duration_seconds_count{mode="sync"}')).toBe(1);
		expectNoKeyMaterial(text, [keeper.keyPem, legacy.keyPem, shopNarrow.keyPem, other.keyPem]);
		expect(await h.workerPid()).toBe(pid);
		// The daemon idles until the source changes (interval 1h): the reload-safety invariant, between cycles.
		await assertReloadSafe(h);
	});

	it("/readyz is 503 after the cycle: no endpoint of target lb-gone was observed (its socket does not exist)", async () => {
		const r = await readyz();
		expect(r.status).toBe(503);
		expect(r.body.ready).toBe(false);
		expect(r.body.unobservedTargets).toEqual(["lb-gone"]);
		const failed = r.body.failedEndpoints as Array<{ target: string; endpoint: string; error: string }>;
		const gone = failed.find((f) => f.target === "lb-gone");
		expect(gone?.error).toContain("no-such.sock");
		// lb1 was observed; its refused update (shop drops a name) is named too.
		expect(failed.find((f) => f.target === "lb1")?.error).toContain("UPDATE_DROPS_NAMES");
		expectNoKeyMaterial(r.text, [keeper.keyPem]);
	});

	it("cycle 2 (woken by the source change): shop is pushed, ref_in_sync flips to 1, duplicates settle to 0", async () => {
		const pid = await h.workerPid();
		const second = nextCycle();
		putSource("shop.pem", shopRenewed.combinedPem);
		const report = await second;
		expect(report.certificates.find((c) => c.name === "shop")?.serial).toBeDefined();
		expect(new X509Certificate(readFileSync(join(h.crtDir, "shop.pem"))).serialNumber).toBe(
			new X509Certificate(shopRenewed.certPem).serialNumber,
		);
		const { text, samples } = await scrape();
		expect(samples.get(sample("certificatee_ref_in_sync", { ...lb1, certificate: "shop" }))).toBe(1);
		for (const state of ["found", "deleted", "pending_reload"])
			expect(samples.get(sample("certificatee_legacy_duplicates", { ...lb1, state }))).toBe(0);
		const op = (operation: string) =>
			samples.get(sample("certificatee_sync_operations_total", { ...lb1, operation, result: "ok" })) ?? 0;
		expect(op("storage-replace")).toBe(1);
		expect(op("runtime-set")).toBe(1);
		expect(op("runtime-delete")).toBe(2);
		expect(
			samples.get(sample("certificatee_certificate_not_after_timestamp_seconds", { certificate: "shop" })),
		).toBe(seconds(shopRenewed.certPem));
		expect(
			samples.get(
				sample("certificatee_ref_not_after_timestamp_seconds", { ...lb1, ref: "shop.pem", class: "stale" }),
			),
		).toBe(seconds(readFileSync(join(h.crtDir, "shop.pem"), "utf8")));
		expect(seconds(shopRenewed.certPem)).not.toBe(seconds(shopWide.certPem));
		// Served by SNI: the probe saw the new certificate.
		expect(samples.get(sample("certificatee_served_serial_match", { ...lb1, sni: "www.shop.test" }))).toBe(1);
		expect([...samples.keys()].filter((k) => k.startsWith("certificatee_reloads_caused_total"))).toEqual([]);
		expect(samples.get('certificatee_cycle_duration_seconds_count{mode="sync"}')).toBe(2);
		expectNoKeyMaterial(text, [shopRenewed.keyPem, keeper.keyPem]);
		expect(await h.workerPid()).toBe(pid);
		await assertReloadSafe(h);
	});
});
