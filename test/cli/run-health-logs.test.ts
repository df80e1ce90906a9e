/**
 * `certificatee run` as a child process with three failures that persist: its HAProxy's runtime socket does
 * not exist yet, a source file is invalid, and its ACME server is a closed port. Over five failing cycles each
 * failure is logged once (with its code, message and hint), never repeated; /readyz answers 503 while no
 * endpoint of the target is observed and /healthz 200 (the loop is alive). Then the socket appears and the
 * file is fixed: each recovery is logged once and /readyz answers 200.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestLeaf } from "../harness/certs.js";
import { type Daemon, ensureBuilt, type LogLine, spawnCertificatee } from "../harness/cli.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { expectNoKeyMaterial } from "../harness/no-secrets.js";
import { freePorts } from "../harness/ports.js";

let dir: string;
let h: Haproxy;
let leaf: TestLeaf;
let daemon: Daemon;
let listen: string;
const socket = () => join(dir, "admin.sock");

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-run-health-"));
	const ca = await createTestCa("run health CA");
	leaf = await issueTestLeaf(ca, { names: ["shop.test"] });
	h = await startHaproxy({ crtDir: { "shop.pem": leaf.combinedPem } });
	const [metricsPort, closedPort] = (await freePorts(2)) as [number, number];
	listen = `127.0.0.1:${metricsPort}`;
	mkdirSync(join(dir, "source"));
	writeFileSync(join(dir, "source", "shop.pem"), leaf.combinedPem, { mode: 0o600 });
	writeFileSync(join(dir, "source", "broken.pem"), "not a certificate\n", { mode: 0o600 });
	const config = {
		state_dir: join(dir, "state"),
		interval: "1s",
		listen,
		sources: [
			{ name: "files", type: "directory", path: join(dir, "source"), debounce: "100ms" },
			{ name: "le", type: "acme", directory_url: `http://127.0.0.1:${closedPort}/dir`, http_retries: 0 },
		],
		certificates: [{ name: "web", domains: ["web.test"], issuer: "le" }],
		targets: [
			{ name: "lb1", type: "haproxy-runtime", socket: socket(), crt_dir: h.crtDir, probe: h.address },
		],
	};
	writeFileSync(join(dir, "certificatee.yaml"), JSON.stringify(config, null, 2));
	daemon = spawnCertificatee(["run", "--config", join(dir, "certificatee.yaml")]);
}, 30_000);

afterAll(async () => {
	await daemon?.stop();
	await h?.stop();
	rmSync(dir, { recursive: true, force: true });
});

const matching = (pattern: RegExp, from = 0) =>
	daemon.logs.slice(from).filter((l) => pattern.test(String(l.msg)));

async function cycles(count: number, from: number): Promise<void> {
	for (let seen = 0; seen < count; ) {
		const hit = await daemon.waitForLog(/^cycle finished$/, { from, timeoutMs: 30_000 });
		from = daemon.logs.indexOf(hit) + 1;
		seen++;
	}
}

async function get(path: string): Promise<{ status: number; body: string }> {
	const res = await fetch(`http://${listen}${path}`);
	return { status: res.status, body: await res.text() };
}

describe("the daemon's logs, /healthz and /readyz with failures that persist, then recover", () => {
	let failed: LogLine[] = [];

	it("five failing cycles: each failure logged once with code, message and hint; none repeated", async () => {
		await cycles(5, 0);
		failed = matching(/ failed: /);
		const byKind = (kind: string) => failed.filter((l) => l.kind === kind);
		expect(byKind("endpoint")).toHaveLength(1);
		expect(byKind("endpoint")[0]).toMatchObject({
			target: "lb1",
			endpoint: "lb1",
			code: "ENDPOINT_UNAVAILABLE",
		});
		expect(String(byKind("endpoint")[0]?.msg)).toContain("admin.sock");
		expect(byKind("source")).toHaveLength(1);
		expect(String(byKind("source")[0]?.subject)).toContain("broken.pem");
		expect(byKind("order")).toHaveLength(1);
		expect(byKind("order")[0]).toMatchObject({ certificate: "web", code: "ACME_ERROR" });
		expect(String(byKind("order")[0]?.msg)).toContain("ECONNREFUSED");
		// Every failure line says what to do.
		for (const line of failed) expect(typeof line.hint, JSON.stringify(line)).toBe("string");
		expect(failed).toHaveLength(3);
		expect(matching(/still failing/)).toEqual([]);
		expectNoKeyMaterial(JSON.stringify(daemon.logs), [leaf.keyPem]);
	});

	it("/healthz 200 (the loop is alive); /readyz 503 naming the target none of whose endpoints was observed", async () => {
		const health = await get("/healthz");
		expect(health.status).toBe(200);
		expect(health.body).toMatch(/^ok: /);
		const ready = await get("/readyz");
		expect(ready.status, ready.body).toBe(503);
		expect(JSON.parse(ready.body)).toMatchObject({ ready: false, unobservedTargets: ["lb1"] });
	});

	it("the socket appears and the file is fixed: each recovery logged once, /readyz 200, the order failure still named", async () => {
		const from = daemon.logs.length;
		symlinkSync(h.adminSocket, socket());
		rmSync(join(dir, "source", "broken.pem"));
		await daemon.waitForLog(/^endpoint recovered/, { from, timeoutMs: 30_000 });
		await daemon.waitForLog(/^source recovered/, { from, timeoutMs: 30_000 });
		await cycles(2, daemon.logs.length);
		expect(matching(/^endpoint recovered/, from)).toHaveLength(1);
		expect(matching(/^source recovered/, from)).toHaveLength(1);
		expect(matching(/ failed: /, from)).toEqual([]);
		const ready = await get("/readyz");
		expect(ready.status, ready.body).toBe(200);
		expect(JSON.parse(ready.body)).toMatchObject({ ready: true, unobservedTargets: [] });
		// The order is still failing (readiness is about observing targets), and /metrics counts it.
		const metrics = (await get("/metrics")).body;
		expect(metrics).toMatch(/^certificatee_order_failures_total\{certificate="web",code="ACME_ERROR"\} 1$/m);
		expect(metrics).toMatch(/^certificatee_source_problems 0$/m);
	});
});
