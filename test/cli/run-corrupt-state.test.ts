/**
 * `certificatee run` as a child process with a corrupt renewal state file (`truncate -s 100`) and `interval: 1h`:
 * the daemon must not cycle every second (it used to: nextRenewalAt = now on every error), the failure is logged
 * as STATE_CORRUPT naming the file path with a hint to restore or delete it, and the certificate already issued
 * stays in the desired set (its directory target is still in sync).
 */
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { certificatee, type Daemon, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { freePorts } from "../harness/ports.js";

let dir: string;
let daemon: Daemon | undefined;
let configFile: string;
const stateFile = () => join(dir, "state", "renewal", "web.json");

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-corrupt-state-"));
	const [port] = (await freePorts(1)) as [number];
	const config = {
		state_dir: join(dir, "state"),
		interval: "1h",
		listen: `127.0.0.1:${port}`,
		sources: [{ name: "internal", type: "local-ca", ca_common_name: "Corrupt State Test CA" }],
		certificates: [{ name: "web", domains: ["web.test"], issuer: "internal" }],
		targets: [{ name: "files", type: "directory", path: join(dir, "out"), layout: "haproxy-pem" }],
	};
	configFile = join(dir, "certificatee.yaml");
	writeFileSync(configFile, JSON.stringify(config, null, 2));
	const first = await certificatee(["sync", "--once", "--config", configFile]);
	expect(first.code, first.stderr + first.stdout).toBe(0);
}, 60_000);

afterAll(async () => {
	await daemon?.stop();
	rmSync(dir, { recursive: true, force: true });
});

describe("a corrupt renewal state file under the daemon", () => {
	it("backs off (at most 2 cycles in 10 s with interval 1h), logs STATE_CORRUPT naming the file, keeps serving", async () => {
		const served = readFileSync(join(dir, "out", "web.pem"), "utf8");
		truncateSync(stateFile(), 100);
		daemon = spawnCertificatee(["run", "--config", configFile]);
		await daemon.waitForLog(/^cycle finished$/, { timeoutMs: 30_000 });
		await new Promise((r) => setTimeout(r, 10_000));
		const cycles = daemon.logs.filter((l) => l.msg === "cycle finished");
		expect(cycles.length).toBeLessThanOrEqual(2);
		const corrupt = daemon.logs.filter((l) => l.code === "STATE_CORRUPT");
		expect(corrupt.length, JSON.stringify(daemon.logs)).toBeGreaterThanOrEqual(1);
		expect(corrupt, JSON.stringify(corrupt)).toHaveLength(1); // logged once, not every cycle
		const line = JSON.stringify(corrupt[0]);
		expect(line).toContain(stateFile());
		expect(String(corrupt[0]?.hint)).toMatch(/restore .*web\.json.*delete it to start over/);
		// Still in the desired set: the directory target has nothing to do and reports no failure for "web".
		expect(daemon.logs.filter((l) => l.code === "NOT_AVAILABLE")).toEqual([]);
		expect(readFileSync(join(dir, "out", "web.pem"), "utf8")).toBe(served);
	}, 60_000);
});
