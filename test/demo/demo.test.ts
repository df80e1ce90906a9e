/**
 * `certificatee demo` as a child process (the built CLI), for a bounded time: it starts its own HAProxy,
 * issues from the demo CA, syncs into the directory target and HAProxy, serves by SNI with a chain that
 * verifies against the CA file it prints, renews once without a reload, and on SIGINT exits 0 leaving no
 * process behind.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "node:tls";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import type { StatusSummary } from "../../src/metrics/status-view.js";
import { scaled } from "../harness/deadline.js";
import { socketCommand } from "../harness/haproxy.js";
import { expectNoKeyMaterial } from "../harness/no-secrets.js";

const run = promisify(execFile);
const cli = join(import.meta.dirname, "../../dist/cli/main.js");
const dir = mkdtempSync(join(tmpdir(), "certificatee-demo-"));
const stateDir = join(dir, "state");
let child: ChildProcess | undefined;

/** Pids of live processes whose command line mentions the demo's state directory (its HAProxy). */
function processesUsing(path: string): number[] {
	const pids: number[] = [];
	for (const entry of readdirSync("/proc")) {
		if (!/^\d+$/.test(entry)) continue;
		try {
			const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
			const state = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]?.[0];
			if (cmdline.includes(path) && state !== "Z") pids.push(Number(entry));
		} catch {}
	}
	return pids;
}

afterAll(async () => {
	if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
	// Only if the test failed half-way: the demo's own HAProxy, found by its state directory.
	for (const pid of processesUsing(stateDir)) process.kill(pid, "SIGKILL");
	rmSync(dir, { recursive: true, force: true });
});

interface Served {
	serial: string;
	authorized: boolean;
	error?: string;
	names: string;
}

function probe(port: number, sni: string, ca: Buffer): Promise<Served> {
	return new Promise((resolve, reject) => {
		const socket = connect(
			{ host: "127.0.0.1", port, servername: sni, ca, rejectUnauthorized: false },
			() => {
				const cert = socket.getPeerCertificate();
				resolve({
					serial: cert.serialNumber,
					authorized: socket.authorized,
					names: cert.subjectaltname ?? "",
					...(socket.authorizationError ? { error: String(socket.authorizationError) } : {}),
				});
				socket.end();
			},
		);
		socket.once("error", reject);
	});
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await fn().catch(() => undefined);
		if (value !== undefined) return value;
		if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
		await sleep(200);
	}
}

describe("demo (the built CLI as a child process)", () => {
	it("issues, syncs, serves by SNI, renews once without reload, and stops cleanly on SIGINT", async () => {
		const started = Date.now();
		const { NO_COLOR: _n, ...env } = process.env;
		child = spawn(process.execPath, [cli, "demo", "--state-dir", stateDir, "--lifetime", "15s"], {
			env: { ...env, CERTIFICATEE_LOG_LEVEL: "warn" },
			stdio: ["ignore", "pipe", "pipe"],
		});
		let stdout = "";
		let stderr = "";
		child.stdout?.on("data", (d: Buffer) => {
			stdout += d.toString();
		});
		child.stderr?.on("data", (d: Buffer) => {
			stderr += d.toString();
		});
		const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
			child?.once("exit", (code, signal) => resolve({ code, signal })),
		);

		// It prints how to look: the HAProxy port, the CA file, the metrics URL.
		const printed = await until(
			"the demo's instructions",
			async () => (stdout.includes("metrics: curl") ? stdout : undefined),
			20_000,
		);
		const port = Number(/HAProxy on 127\.0\.0\.1:(\d+)/.exec(printed)?.[1]);
		const caFile = /trust the demo CA: (\S+)/.exec(printed)?.[1] ?? "";
		const metricsUrl = /metrics: curl (\S+)/.exec(printed)?.[1] ?? "";
		expect(port).toBeGreaterThan(0);
		expect(caFile).toBe(join(stateDir, "demo-ca.pem"));
		expect(printed).toContain(`--resolve a.demo.test:${port}:127.0.0.1`);
		const ca = readFileSync(caFile);
		expect(new X509Certificate(ca).subject).toContain("certificatee demo CA");

		// Issued and synced: HAProxy serves a.demo.test with a chain that verifies against the CA file.
		const first = await until(
			"a.demo.test served by the demo CA",
			async () => {
				const s = await probe(port, "a.demo.test", ca);
				return s.authorized && s.names.includes("DNS:a.demo.test") ? s : undefined;
			},
			20_000,
		);
		await until(
			"b.demo.test served by the demo CA",
			async () => ((await probe(port, "b.demo.test", ca)).authorized ? true : undefined),
			10_000,
		);
		const adminSocket = join(stateDir, "haproxy", "admin.sock");
		const pidOf = async () => /^Pid: (\d+)$/m.exec(await socketCommand(adminSocket, "show info"))?.[1];
		const workerPid = await pidOf();
		expect(workerPid).toBeDefined();
		// The directory target holds the same certificate.
		const fileCert = () =>
			new X509Certificate(readFileSync(join(stateDir, "out", "demo-a", "tls.crt"))).serialNumber;
		expect(fileCert()).toBe(first.serial);
		const ready = await fetch(metricsUrl.replace("/metrics", "/readyz"));
		expect(ready.status).toBe(200);
		expect(((await ready.json()) as { failedEndpoints: unknown[] }).failedEndpoints).toEqual([]);

		// Renewed once: a new serial is served, by the same HAProxy worker (no reload).
		const renewed = await until(
			"a renewal served",
			async () => {
				const s = await probe(port, "a.demo.test", ca);
				return s.serial !== first.serial && s.authorized ? s : undefined;
			},
			25_000,
		);
		expect(renewed.names).toContain("DNS:www.a.demo.test");
		expect(await pidOf()).toBe(workerPid);
		await until(
			"the directory target renewed",
			async () => (fileCert() !== first.serial ? true : undefined),
			5_000,
		);
		// `certificatee status` on the configuration file the demo printed tells the same story.
		// Run exactly as printed (in the demo's directory, through a shell): `certificatee` only when it is on PATH.
		const shown = /the whole story: (.+ status -c \S+)$/m.exec(printed)?.[1] ?? "";
		expect(shown).toMatch(/^(certificatee|node \S+main\.js) status -c /);
		// The demo renews its 15-second certificates every few seconds, so one look can fall inside a renewal (a
		// change pending, rightly not converged): look again until a moment between renewals, then judge that one.
		const look = async () =>
			(JSON.parse((await run("sh", ["-c", `${shown} --json`], { env })).stdout) as { summary: StatusSummary })
				.summary;
		const allConverged = (s: StatusSummary) =>
			s.certificates.every((c) => c.targets.every((t) => t.converged === t.total));
		let summary = await look();
		const lookUntil = Date.now() + scaled(20_000);
		while (!allConverged(summary) && Date.now() < lookUntil) summary = await look();
		expect(summary.certificates.map((c) => [c.name, c.issuer])).toEqual([
			["demo-a", "demo-ca"],
			["demo-b", "demo-ca"],
		]);
		for (const c of summary.certificates) {
			expect(c.targets).toEqual([
				{ target: "demo-files", converged: 1, total: 1, reasons: [] },
				{ target: "demo-haproxy", converged: 1, total: 1, reasons: [] },
			]);
		}
		expect(summary.duplicates).toEqual([]);
		const scrape = await (await fetch(metricsUrl)).text();
		expect(scrape).toMatch(/certificatee_reloads_caused_total|certificatee_ref_in_sync/);
		expect(scrape).not.toMatch(/certificatee_reloads_caused_total\{/);
		expectNoKeyMaterial(scrape);

		// Ctrl-C: exits 0, and nothing it started is left.
		const haproxyPids = processesUsing(stateDir);
		expect(haproxyPids.length).toBeGreaterThanOrEqual(2); // master and worker
		child.kill("SIGINT");
		const { code, signal } = await exited;
		expect({ code, signal }).toEqual({ code: 0, signal: null });
		expect(processesUsing(stateDir)).toEqual([]);
		// Nothing answers any more: not the admin socket, not the TLS port, not the metrics server.
		await expect(socketCommand(adminSocket, "show info")).rejects.toThrow();
		await expect(probe(port, "a.demo.test", ca)).rejects.toThrow(/ECONNREFUSED/);
		await expect(fetch(metricsUrl)).rejects.toThrow();
		expectNoKeyMaterial(stdout + stderr);
		console.log(`demo: first renewal served after ${((Date.now() - started) / 1000).toFixed(1)} s in all`);
	}, 60_000);
});
