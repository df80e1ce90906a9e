/**
 * What `certificatee run` remembers of its endpoints (pinned duplicates, backoff) survives SIGHUP and a
 * restart, because it lives in the state store; a corrupt record is logged with its path and the daemon runs on.
 * A real daemon (child process) against a real HAProxy behind the Data Plane API double.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../harness/certs.js";
import { certificatee, type Daemon, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { type DpapiDouble, startDpapiDouble } from "../harness/dpapi-double/index.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { assertReloadSafe } from "../harness/invariant.js";
import { freePorts } from "../harness/ports.js";

const NAMES = ["persist.test"];

let ca: TestIssuer;
let dir: string;
const daemons: Daemon[] = [];
const fleets: Array<{ h: Haproxy; d: DpapiDouble }> = [];

beforeAll(async () => {
	await ensureBuilt();
	ca = await createTestCa("cli state CA");
	dir = mkdtempSync(join(tmpdir(), "certificatee-cli-state-"));
});

afterEach(async () => {
	for (const daemon of daemons.splice(0)) await daemon.stop();
	for (const { h, d } of fleets.splice(0)) {
		d.clearFaults();
		await assertReloadSafe(h);
		await d.close();
		await h.stop();
	}
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** HAProxy with the keeper and a legacy duplicate of it, the double over it, and a config for one endpoint. */
async function setup(test: string) {
	const keeper = await issueTestLeaf(ca, { names: NAMES });
	const legacy = await issueTestLeaf(ca, { names: NAMES });
	const h = await startHaproxy({
		crtDir: { "persist.pem": keeper.combinedPem, "legacy_persist.pem": legacy.combinedPem },
	});
	const d = await startDpapiDouble({ haproxy: h });
	fleets.push({ h, d });
	const base = join(dir, test);
	const sourceDir = join(base, "source");
	mkdirSync(sourceDir, { recursive: true });
	writeFileSync(join(sourceDir, "persist.pem"), keeper.combinedPem, { mode: 0o600 });
	const [port] = await freePorts(1);
	const stateDir = join(base, "state");
	const config = join(base, "config.json");
	writeFileSync(
		config,
		JSON.stringify({
			state_dir: stateDir,
			interval: "1h",
			listen: `127.0.0.1:${port}`,
			sources: [{ name: "files", type: "directory", path: sourceDir }],
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
		}),
	);
	return { h, d, config, record: join(stateDir, "endpoints", "lb.json") };
}

async function start(config: string): Promise<Daemon> {
	const daemon = spawnCertificatee(["run", "--config", config]);
	daemons.push(daemon);
	await daemon.waitForLog(/cycle finished/);
	return daemon;
}

async function stop(daemon: Daemon): Promise<void> {
	daemon.signal("SIGTERM");
	expect(await daemon.exited).toBe(0);
}

/** SIGHUP: the engine and its targets are rebuilt; resolves when the cycle after the reload finished. */
async function reload(daemon: Daemon): Promise<void> {
	const from = daemon.logs.length;
	daemon.signal("SIGHUP");
	await daemon.waitForLog(/configuration reloaded/, { from });
	await daemon.waitForLog(/cycle finished/, { from });
}

/** Requests the double received while `run` ran. */
async function requestsAt(d: DpapiDouble, run: () => Promise<unknown>): Promise<number> {
	const before = d.requests.length;
	await run();
	return d.requests.length - before;
}

const storedRecord = (file: string) =>
	JSON.parse(readFileSync(file, "utf8")) as {
		value: {
			endpoints: Record<string, { failures: number; skipLeft: number; pinned: Record<string, string> }>;
		};
	};

describe("certificatee run: endpoint memory in the state store", () => {
	it("a duplicate whose storage DELETE was refused (409) is not deleted again after a restart or SIGHUP", async () => {
		const { d, config, record } = await setup("pinned");
		d.inject({
			operation: "deleteStorageSSLCertificate",
			kind: "status",
			status: 409,
			message: "rejecting attempt to delete file referenced in haproxy conf",
		});
		const first = await start(config);
		expect(d.count("deleteStorageSSLCertificate")).toBe(1);
		expect(Object.keys(storedRecord(record).value.endpoints["haproxy-1"]?.pinned ?? {})).toEqual([
			"legacy_persist.pem",
		]);
		await stop(first);

		const second = await start(config);
		await reload(second);
		await reload(second);
		expect(d.count("deleteStorageSSLCertificate"), JSON.stringify(d.requests.map((r) => r.operation))).toBe(
			1,
		);
		// Nothing changed after the restart: the record was not rewritten (version 1: written once).
		expect((JSON.parse(readFileSync(record, "utf8")) as { version: number }).version).toBe(1);
		await stop(second);
	});

	it("an endpoint's backoff survives SIGHUP and a restart: it still sits out its cycles; status says so", async () => {
		const { d, config, record } = await setup("backoff");
		d.inject({ kind: "status500", message: "endpoint down" });
		const requestsDuring = (cycle: () => Promise<unknown>) => requestsAt(d, cycle);
		// Failures 1 and 2 (the second: sit out one cycle), across a SIGHUP.
		const daemon = await start(config);
		expect(d.requests.length).toBeGreaterThan(0);
		expect(await requestsDuring(() => reload(daemon))).toBeGreaterThan(0);
		expect(storedRecord(record).value.endpoints["haproxy-1"]).toMatchObject({ failures: 2, skipLeft: 1 });
		// After a SIGHUP the endpoint sits its cycle out, then is tried and fails a third time (sit out two).
		expect(await requestsDuring(() => reload(daemon))).toBe(0);
		expect(await requestsDuring(() => reload(daemon))).toBeGreaterThan(0);
		expect(storedRecord(record).value.endpoints["haproxy-1"]).toMatchObject({ failures: 3, skipLeft: 2 });
		await stop(daemon);

		// status (read-only) looks at the endpoint anyway and shows the remembered backoff; it writes nothing.
		const status = await certificatee(["--json", "status", "--config", config]);
		const summary = (JSON.parse(status.stdout) as { summary: { endpoints: Array<{ reason?: string }> } })
			.summary;
		expect(summary.endpoints[0]?.reason).toMatch(
			/backing off after 3 failed cycle\(s\) in a row: sits out the next 2 sync cycle\(s\)/,
		);
		expect((JSON.parse(readFileSync(record, "utf8")) as { version: number }).version).toBe(4);

		// Restarted: the first cycles are sat out (no request reaches the endpoint), then it is tried again.
		let restarted: Daemon | undefined;
		expect(
			await requestsDuring(async () => {
				restarted = await start(config);
			}),
		).toBe(0);
		const again = restarted as Daemon;
		expect(again.logs.some((l) => /skipped after 3 failed cycles/.test(JSON.stringify(l)))).toBe(true);
		expect(await requestsDuring(() => reload(again))).toBe(0);
		d.clearFaults();
		expect(await requestsDuring(() => reload(again))).toBeGreaterThan(0);
		expect(storedRecord(record).value.endpoints).toEqual({});
		await stop(again);
	});

	it("sync --once, an operator asking now, tries an endpoint the daemon is backing off from, and counts its failure", async () => {
		const { d, config, record } = await setup("once");
		d.inject({ kind: "status500", message: "endpoint down" });
		const requestsDuring = (run: () => Promise<unknown>) => requestsAt(d, run);
		const once = () => certificatee(["sync", "--once", "--config", config]);
		for (let i = 0; i < 2; i++) expect((await once()).code).toBe(1);
		// Two failures in a row: the daemon would sit the next cycle out.
		expect(storedRecord(record).value.endpoints["haproxy-1"]).toMatchObject({ failures: 2, skipLeft: 1 });
		let third: Awaited<ReturnType<typeof once>> | undefined;
		expect(
			await requestsDuring(async () => {
				third = await once();
			}),
		).toBeGreaterThan(0);
		expect(third?.code).toBe(1);
		expect(storedRecord(record).value.endpoints["haproxy-1"]).toMatchObject({ failures: 3, skipLeft: 2 });
	});

	it("a corrupt record is logged with its file path and the daemon keeps running and syncing", async () => {
		const { d, config, record } = await setup("corrupt");
		mkdirSync(join(record, ".."), { recursive: true });
		writeFileSync(record, '{"version": 3, "value": {"endp', { mode: 0o600 });
		const daemon = await start(config);
		const warned = daemon.logs.find((l) => /endpoint state unreadable/.test(String(l.msg)));
		expect(warned, JSON.stringify(daemon.logs)).toBeDefined();
		expect(warned?.file).toBe(record);
		// The cycle ran: the legacy duplicate was removed.
		expect(d.count("deleteStorageSSLCertificate")).toBe(1);
		await reload(daemon);
		expect(daemon.child.exitCode).toBeNull();
		// plan reads the same record: it warns the same way and still plans.
		const plan = await certificatee(["plan", "--config", config]);
		expect(plan.stderr).toContain(record);
		expect(plan.code).toBe(0);
		await stop(daemon);
	});
});
