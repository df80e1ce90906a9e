/**
 * What the daemon holds is let go: the real engine (buildEngine) with an ACME issuer whose connection pool talks
 * to a loopback HTTPS server (the recorded-ARI CA). Each cycle asks the CA for a renewal window over a
 * keep-alive connection; the server never closes idle connections itself, so a pool nobody closes stays open.
 * A SIGHUP rebuild must close the old pool before the new engine talks to the CA; a stop must close the last.
 * The loop runs on fake time.
 */
import { EventEmitter } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { buildEngine } from "../../src/daemon/engine.js";
import { runDaemon } from "../../src/daemon/loop.js";
import { createLogger } from "../../src/log.js";
import { createMetrics } from "../../src/metrics/index.js";
import { openFileStore } from "../../src/store/file-store.js";
import { storeIssued } from "../../src/store/records.js";
import { type AriServer, startAriServer } from "../harness/ari-server.js";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { fakeClock } from "../harness/fake-clock.js";

let ari: AriServer;
let stateDir: string;

beforeAll(async () => {
	ari = await startAriServer();
	stateDir = await mkdtemp(join(tmpdir(), "certificatee-lifecycle-"));
	// A certificate the ACME issuer issued earlier, far from renewal: each cycle only asks for its ARI window.
	const leaf = await issueTestLeaf(await createTestCa(), { names: ["site.test"] });
	const store = await openFileStore(stateDir);
	await storeIssued(
		store,
		"site",
		{
			certPem: leaf.certPem,
			chainPem: leaf.chainPem,
			keyPem: leaf.keyPem,
			issuer: "ca",
			domains: ["site.test"],
			keyType: "ecdsa-p256",
			serial: leaf.serial,
			notBefore: new Date(Date.now() - 60_000).toISOString(),
			notAfter: new Date(Date.now() + 90 * 86_400_000).toISOString(),
			issuedAt: new Date().toISOString(),
		},
		undefined,
	);
	store.close();
});

afterAll(async () => {
	await ari?.stop();
	await rm(stateDir, { recursive: true, force: true });
});

describe("daemon lifecycle with the real engine", () => {
	it("a SIGHUP rebuild closes the old issuer's pool before the new one connects; stopping closes the last", async () => {
		const loaded = parseConfig(
			{
				state_dir: stateDir,
				interval: "10m",
				listen: "127.0.0.1:0",
				sources: [{ name: "ca", type: "acme", directory_url: ari.directoryUrl, ca_file: ari.caFile }],
				certificates: [{ name: "site", domains: ["site.test"], issuer: "ca" }],
			},
			"(test)",
			{ env: {} },
		);
		const clock = fakeClock(Date.now());
		const signals = new EventEmitter();
		const log = createLogger({ level: "silent" });
		const metrics = createMetrics();
		const done = runDaemon({
			loadConfig: () => loaded,
			build: (config) => buildEngine(config, { log, readOnly: false, metrics }),
			metrics,
			log,
			signals,
			clock,
		});
		await clock.nextSleep();
		expect(ari.requests.filter((r) => r === "/directory").length).toBeGreaterThanOrEqual(1);
		expect(ari.connections.map((c) => c.open)).toEqual([true]);

		signals.emit("SIGHUP");
		await clock.nextSleep(); // the rebuilt engine has run its cycle
		expect(ari.connections).toHaveLength(2);
		// The first pool was closed (its connection with it) before the second engine opened its own.
		expect(ari.connections[1]!.openBefore).toBe(0);
		expect(ari.connections.map((c) => c.open)).toEqual([false, true]);

		signals.emit("SIGTERM");
		await done;
		// A connection of our own, after the daemon stopped: none of the daemon's is open any more.
		const probe = new Agent({ connect: { ca: ari.caPem } });
		await (await request(ari.directoryUrl, { dispatcher: probe })).body.text();
		await probe.close();
		expect(ari.connections).toHaveLength(3);
		expect(ari.connections[2]!.openBefore).toBe(0);
		expect(ari.connections.slice(0, 2).map((c) => c.open)).toEqual([false, false]);
	});
});
