/**
 * `certificatee renew` and `revoke` as child processes against a real Pebble, pushing to a directory target.
 * renew: the CA was unreachable, so the certificate backs off; `renew web` refuses (naming the backoff and
 * --force); `renew web --force` orders at once, clears the failures and counts the forced order.
 * revoke: Pebble reports the old serial revoked (its management API), and a new certificate is in the
 * directory target.
 */
import { X509Certificate } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { type PebbleHandle, startPebble } from "../harness/pebble.js";
import { freePorts } from "../harness/ports.js";

let dir: string;
let pebble: PebbleHandle;
let configFile: string;
let closedPort: number;

function writeConfig(directoryUrl: string): void {
	const config = {
		state_dir: join(dir, "state"),
		sources: [
			{
				name: "le",
				type: "acme",
				directory_url: directoryUrl,
				ca_file: pebble.caFile,
				email: "ops@example.com",
				http01: { listen: `127.0.0.1:${pebble.httpPort}` },
				poll_interval: "250ms",
				http_retries: 0,
			},
		],
		certificates: [{ name: "web", domains: ["web.test"], issuer: "le" }],
		targets: [{ name: "files", type: "directory", path: join(dir, "out"), layout: "haproxy-pem" }],
	};
	writeFileSync(configFile, JSON.stringify(config, null, 2));
}

const servedSerial = () => new X509Certificate(readFileSync(join(dir, "out", "web.pem"))).serialNumber;
const renewalState = () => JSON.parse(readFileSync(join(dir, "state", "renewal", "web.json"), "utf8")).value;

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-renew-revoke-"));
	configFile = join(dir, "certificatee.yaml");
	pebble = await startPebble({ validation: "always-valid" });
	[closedPort] = (await freePorts(1)) as [number];
}, 60_000);

afterAll(async () => {
	await pebble?.stop();
	rmSync(dir, { recursive: true, force: true });
});

describe("renew and revoke against Pebble", () => {
	it("renew refuses while backing off; renew --force orders now, clears the failures and is counted", async () => {
		writeConfig(`https://127.0.0.1:${closedPort}/dir`);
		const failed = await certificatee(["sync", "--config", configFile]);
		expect(failed.code).toBe(1);
		expect(renewalState()).toMatchObject({ failures: 1 });

		writeConfig(pebble.directoryUrl);
		const refused = await certificatee(["renew", "web", "--config", configFile]);
		expect(refused.code, refused.stdout + refused.stderr).toBe(1);
		expect(refused.stderr).toMatch(/backing off after 1 failure/);
		expect(refused.stderr).toContain("renew web --force");

		const forced = await certificatee(["renew", "web", "--force", "--config", configFile]);
		expect(forced.code, forced.stdout + forced.stderr).toBe(0);
		expect(forced.stderr).toMatch(/renewal forced by an operator/);
		const state = renewalState();
		expect(state).toMatchObject({ failures: 0, forcedRenewals: 1 });
		expect(state.forceRequestedAt).toBeUndefined();
		expect(state.orders).toHaveLength(1);
		expect(servedSerial()).toMatch(/^[0-9A-F]+$/);
	}, 60_000);

	it("revoke: Pebble reports the old serial revoked; a new certificate is issued and pushed", async () => {
		const old = servedSerial();
		const r = await certificatee(["revoke", "web", "--reason", "keyCompromise", "--config", configFile]);
		expect(r.code, r.stdout + r.stderr).toBe(0);
		const renewed = servedSerial();
		expect(renewed).not.toBe(old);
		const agent = new Agent({ connect: { ca: pebble.caPem } });
		const status = async (serial: string) => {
			const res = await request(`${pebble.managementUrl}/cert-status-by-serial/${serial.toLowerCase()}`, {
				dispatcher: agent,
			});
			return (await res.body.json()) as { Status?: string };
		};
		expect((await status(old)).Status).toBe("Revoked");
		expect((await status(renewed)).Status).toBe("Valid");
		await agent.close();
		expect(renewalState()).toMatchObject({ forcedRenewals: 2, failures: 0 });

		const bad = await certificatee(["revoke", "web", "--reason", "becauseISaidSo", "--config", configFile]);
		expect(bad.code).toBe(1);
		expect(bad.stderr).toContain("keyCompromise");
	}, 60_000);

	it("the daemon reports the forced orders as certificatee_forced_renewals_total (kept in the state store)", async () => {
		const [port] = (await freePorts(1)) as [number];
		const config = JSON.parse(readFileSync(configFile, "utf8"));
		const withListen = join(dir, "daemon.yaml");
		writeFileSync(withListen, JSON.stringify({ ...config, listen: `127.0.0.1:${port}`, interval: "1h" }));
		const daemon = spawnCertificatee(["run", "--config", withListen]);
		try {
			await daemon.waitForLog(/^cycle finished$/, { timeoutMs: 30_000 });
			const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
			expect(metrics).toMatch(/^certificatee_forced_renewals_total\{certificate="web"\} 2$/m);
		} finally {
			await daemon.stop();
		}
	}, 60_000);

	it("with the daemon running, renew and revoke leave a request it serves at once, and print when it was served", async () => {
		const [port] = (await freePorts(1)) as [number];
		const config = JSON.parse(readFileSync(configFile, "utf8"));
		const withListen = join(dir, "daemon-requests.yaml");
		writeFileSync(withListen, JSON.stringify({ ...config, listen: `127.0.0.1:${port}`, interval: "1h" }));
		const daemon = spawnCertificatee(["run", "--config", withListen]);
		try {
			await daemon.waitForLog(/^cycle finished$/, { timeoutMs: 30_000 });
			const before = servedSerial();
			const from = daemon.logs.length;
			// Not due, not backing off: a plain renew; the daemon's interval (1 h) is not waited for.
			const renewed = await certificatee(["renew", "web", "--config", withListen], { timeoutMs: 60_000 });
			expect(renewed.code, renewed.stdout + renewed.stderr).toBe(0);
			const after = servedSerial();
			expect(after).not.toBe(before);
			expect(renewed.stdout).toMatch(
				new RegExp(`^web: serial ${after} served at \\d{4}-\\d\\d-\\d\\dT`, "m"),
			);
			expect(renewed.stdout).toMatch(/taken by the daemon \(pid \d+\)/);
			expect(renewed.stdout).toMatch(/^ {2}files \S+out: served$/m);
			expect(renewed.stderr).toMatch(/request taken by the daemon/);
			await daemon.waitForLog(/^operator renew served/, { from });

			// revoke goes through the daemon too (it holds the issuer's account): the old serial is revoked.
			const revoked = await certificatee(
				["revoke", "web", "--reason", "superseded", "--config", withListen],
				{
					timeoutMs: 60_000,
				},
			);
			expect(revoked.code, revoked.stdout + revoked.stderr).toBe(0);
			expect(servedSerial()).not.toBe(after);
			const agent = new Agent({ connect: { ca: pebble.caPem } });
			const res = await request(`${pebble.managementUrl}/cert-status-by-serial/${after.toLowerCase()}`, {
				dispatcher: agent,
			});
			expect(((await res.body.json()) as { Status?: string }).Status).toBe("Revoked");
			await agent.close();

			// Nothing is left behind in the requests folder but the daemon's pid.
			expect(readdirSync(join(dir, "state", "requests"))).toEqual(["daemon.pid"]);
		} finally {
			await daemon.stop();
		}
	}, 90_000);

	it("renew of a certificate a directory source serves says so, naming the source and the file", async () => {
		const sourceDir = join(dir, "files-source");
		mkdirSync(sourceDir, { recursive: true });
		const ca = await createTestCa("renew dir-source CA");
		writeFileSync(join(sourceDir, "api.pem"), (await issueTestLeaf(ca, { names: ["api.test"] })).combinedPem);
		const config = JSON.parse(readFileSync(configFile, "utf8"));
		const file = join(dir, "with-directory.yaml");
		config.sources.push({ name: "files", type: "directory", path: sourceDir });
		writeFileSync(file, JSON.stringify(config));
		const r = await certificatee(["renew", "api", "--config", file]);
		expect(r.code).toBe(1);
		expect(r.stderr).toContain(
			`"api" comes from the directory source "files" (${join(sourceDir, "api.pem")})`,
		);
		expect(r.stderr).not.toContain("configured certificates: none");
	});
});
