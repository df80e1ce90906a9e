/**
 * `certificatee run` as a child process against a real HAProxy behind the Data Plane API double: SIGTERM in
 * the middle of a write lets it finish and stops cleanly (no half-written certificate anywhere); SIGHUP with
 * a broken configuration keeps the old one running, and with a valid one takes it.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial } from "../../src/certificates/index.js";
import { probeServed } from "../../src/probe/index.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";
import { certificatee, type Daemon, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { type DpapiDouble, startDpapiDouble } from "../harness/dpapi-double/index.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { assertReloadSafe } from "../harness/invariant.js";
import { freePorts } from "../harness/ports.js";

const NAMES = ["signals.test"];

let ca: TestIssuer;
let dir: string;
let h: Haproxy;
let d: DpapiDouble;
let pid: number;
const daemons: Daemon[] = [];

beforeAll(async () => {
	await ensureBuilt();
	ca = await createTestCa("cli signals CA");
	dir = mkdtempSync(join(tmpdir(), "certificatee-cli-signals-"));
	const v1 = await issueTestLeaf(ca, { names: NAMES });
	h = await startHaproxy({ crtDir: { "signals.pem": v1.combinedPem } });
	d = await startDpapiDouble({ haproxy: h });
	pid = await h.workerPid();
});

afterEach(async () => {
	d.clearFaults();
	for (const daemon of daemons.splice(0)) await daemon.stop();
	// The reload-safety invariant, once no daemon writes any more; the next test compares with the new worker.
	await assertReloadSafe(h);
	pid = await h.workerPid();
});

afterAll(async () => {
	await d?.close();
	await h?.stop();
	rmSync(dir, { recursive: true, force: true });
});

/** Puts a certificate into a source directory the way a careful writer does: a hidden temp file, then rename. */
function putSource(sourceDir: string, leaf: TestLeaf): void {
	mkdirSync(sourceDir, { recursive: true });
	const temp = join(sourceDir, ".incoming");
	writeFileSync(temp, leaf.combinedPem, { mode: 0o600 });
	renameSync(temp, join(sourceDir, "signals.pem"));
}

function writeConfig(file: string, sourceDir: string, listen: string): void {
	const config = {
		state_dir: join(dir, "state"),
		interval: "1m",
		listen,
		sources: [{ name: "files", type: "directory", path: sourceDir, debounce: "100ms" }],
		targets: [
			{
				name: "lb",
				type: "haproxy-dataplane",
				storage_dir: h.crtDir,
				endpoints: [
					{ name: "haproxy-1", url: d.url, username: d.username, password: d.password, probe: h.address },
				],
			},
		],
	};
	writeFileSync(file, JSON.stringify(config, null, 2));
}

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000) {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await fn();
		if (value !== undefined) return value;
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await sleep(50);
	}
}

const served = async () => (await probeServed({ address: h.address, sni: NAMES[0] as string })).serial;
const serialOf = (leaf: TestLeaf) => normaliseSerial(leaf.serial);

async function startDaemon(sourceDir: string) {
	const [port] = await freePorts(1);
	const listen = `127.0.0.1:${port}`;
	const config = join(dir, `run-${Math.random().toString(16).slice(2)}.yaml`);
	writeConfig(config, sourceDir, listen);
	const daemon = spawnCertificatee(["run", "--config", config]);
	daemons.push(daemon);
	await daemon.waitForLog(/cycle finished/);
	return { daemon, config, listen };
}

describe("certificatee run: signals", () => {
	it("SIGTERM during a slow storage write finishes it and its runtime write, leaves nothing half-written, and exits 0", async () => {
		const sourceDir = join(dir, "term-source");
		const v1 = await issueTestLeaf(ca, { names: NAMES });
		putSource(sourceDir, v1);
		const { daemon, config } = await startDaemon(sourceDir);
		await until("v1 served", async () => ((await served()) === serialOf(v1) ? true : undefined));

		d.inject({ operation: "replaceStorageSSLCertificate", kind: "latency", ms: 1_500 });
		const v2 = await issueTestLeaf(ca, { names: NAMES });
		const startedBefore = d.requests.length;
		putSource(sourceDir, v2);
		const inFlight = await until("the storage write in flight", () =>
			d.requests
				.slice(startedBefore)
				.find((r) => r.operation === "replaceStorageSSLCertificate" && r.endedAt === undefined),
		);
		const signalled = Date.now();
		daemon.signal("SIGTERM");
		const code = await Promise.race([daemon.exited, sleep(10_000).then(() => "still running")]);
		expect(code, JSON.stringify(daemon.logs)).toBe(0);
		console.log(`run: exited ${Date.now() - signalled} ms after SIGTERM (write in flight: 1500 ms latency)`);
		expect(daemon.logs.some((l) => /stopping after in-flight writes/.test(String(l.msg)))).toBe(true);

		// The write that was in flight finished, and so did the runtime write of the same certificate: a stop
		// never leaves a file on disk that HAProxy does not serve (a reload would change what is served).
		expect(inFlight.status).toBe(200);
		expect(
			d.requests
				.slice(startedBefore)
				.filter((r) => r.operation === "replaceCert")
				.map((r) => r.status),
		).toEqual([200]);
		const stored = readFileSync(join(h.crtDir, "signals.pem"), "utf8");
		expect(normaliseSerial(new X509Certificate(stored).serialNumber)).toBe(serialOf(v2));
		expect(createPrivateKey(stored).asymmetricKeyType).toBeDefined();
		// Runtime holds the new certificate whole, with no transaction left open.
		expect(await served()).toBe(serialOf(v2));
		expect(await h.command("show ssl cert")).not.toMatch(/^\*/m);

		d.clearFaults();
		const sync = await certificatee(["--json", "sync", "--once", "--config", config]);
		expect(sync.code, sync.stdout).toBe(0);
		const steps = (JSON.parse(sync.stdout) as { targets: Array<{ endpoints: Array<{ steps: unknown[] }> }> })
			.targets[0]?.endpoints[0]?.steps as Array<{ op: string }>;
		expect(steps.map((s) => s.op)).toEqual([]);
		expect(await served()).toBe(serialOf(v2));
		expect(await h.workerPid()).toBe(pid);
		expect(d.scheduledReloads).toEqual([]);
		// Two daemon starts, a write delayed 1.5 s and a sync: its waits are scaled to the machine (harness/deadline.ts).
	}, 180_000);

	it("SIGHUP with a broken config keeps running on the old one; SIGHUP with a valid changed config takes it", async () => {
		const sourceA = join(dir, "hup-source-a");
		const sourceB = join(dir, "hup-source-b");
		const v1 = await issueTestLeaf(ca, { names: NAMES });
		putSource(sourceA, v1);
		const { daemon, config, listen } = await startDaemon(sourceA);
		await until("v1 served", async () => ((await served()) === serialOf(v1) ? true : undefined));

		const good = readFileSync(config, "utf8");
		writeFileSync(config, good.replace('"interval": "1m"', '"interval": "forever"'));
		let from = daemon.logs.length;
		daemon.signal("SIGHUP");
		const rejected = await daemon.waitForLog(/new configuration rejected/, { from });
		expect(String(rejected.error)).toContain("interval");
		await daemon.waitForLog(/cycle finished/, { from });
		const ready = await fetch(`http://${listen}/readyz`);
		expect(ready.status).toBe(200);
		// Visible beyond the log line: /readyz says so (still ready: the old one runs), and a metric.
		const readyBody = (await ready.json()) as {
			reason: string;
			configRejected?: { at: string; error: string };
		};
		expect(readyBody.configRejected?.error).toContain("interval");
		expect(readyBody.reason).toMatch(
			/configuration file was rejected on SIGHUP at \S+ \(the previous one runs\)/,
		);
		const scrape = async () => (await fetch(`http://${listen}/metrics`)).text();
		expect(await scrape()).toMatch(/^certificatee_config_last_reload_successful 0$/m);

		// Still working on the old configuration: a renewal in source A is delivered.
		const v2 = await issueTestLeaf(ca, { names: NAMES });
		putSource(sourceA, v2);
		await until("v2 served", async () => ((await served()) === serialOf(v2) ? true : undefined));

		// A valid change (another source directory), signalled while a cycle runs, is taken when that cycle
		// ends, not an interval (1m) later.
		const v3 = await issueTestLeaf(ca, { names: NAMES });
		putSource(sourceB, v3);
		d.inject({ operation: "getAllStorageSSLCertificates", kind: "latency", ms: 1_000, times: 1 });
		const mark = d.requests.length;
		putSource(sourceA, v2);
		await until("a cycle in flight", () =>
			d.requests
				.slice(mark)
				.find((r) => r.operation === "getAllStorageSSLCertificates" && r.endedAt === undefined),
		);
		writeFileSync(config, good.replace(sourceA, sourceB));
		from = daemon.logs.length;
		daemon.signal("SIGHUP");
		await daemon.waitForLog(/configuration reloaded/, { from, timeoutMs: 15_000 });
		await until("v3 served", async () => ((await served()) === serialOf(v3) ? true : undefined));
		const metrics = await scrape();
		expect(metrics).toMatch(/^certificatee_config_last_reload_successful 1$/m);
		expect(metrics).toMatch(/^certificatee_build_info\{version="[^"]+",nodejs="v\d+[^"]*"\} 1$/m);
		expect(metrics).toMatch(/^process_resident_memory_bytes \d+/m);
		expect(metrics).toMatch(/^nodejs_eventloop_lag_seconds /m);
		expect(
			((await (await fetch(`http://${listen}/readyz`)).json()) as { configRejected?: unknown })
				.configRejected,
		).toBeUndefined();

		daemon.signal("SIGTERM");
		expect(await daemon.exited).toBe(0);
		expect(await h.workerPid()).toBe(pid);
		d.assertSpecClean();
	});
});
