/**
 * `certificatee acme rollover --source le` against a real Pebble: the account keeps its URL, the key on disk
 * changes (no account.next.key left behind), a new order then succeeds with the new key, and the old key is
 * no longer accepted by Pebble for that account.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../src/errors.js";
import { createAcmeIssuer } from "../../src/sources/acme/index.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { type PebbleHandle, startPebble } from "../harness/pebble.js";
import { pebbleConfig } from "../sources/acme/helpers.js";

let dir: string;
let pebble: PebbleHandle;
let configFile: string;
const accountDir = () => join(dir, "state", "acme", "le");

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-rollover-"));
	pebble = await startPebble({ validation: "always-valid" });
	configFile = join(dir, "certificatee.yaml");
	const config = {
		state_dir: join(dir, "state"),
		sources: [
			{
				name: "le",
				type: "acme",
				directory_url: pebble.directoryUrl,
				ca_file: pebble.caFile,
				http01: { listen: `127.0.0.1:${pebble.httpPort}` },
				poll_interval: "250ms",
			},
		],
		certificates: [{ name: "web", domains: ["web.test"], issuer: "le" }],
		targets: [{ name: "files", type: "directory", path: join(dir, "out"), layout: "haproxy-pem" }],
	};
	writeFileSync(configFile, JSON.stringify(config, null, 2));
}, 60_000);

afterAll(async () => {
	await pebble?.stop();
	rmSync(dir, { recursive: true, force: true });
});

describe("acme rollover", () => {
	it("rolls the account key over, then orders with the new key; the old key is refused", async () => {
		const first = await certificatee(["sync", "--config", configFile]);
		expect(first.code, first.stdout + first.stderr).toBe(0);
		const oldKey = readFileSync(join(accountDir(), "account.key"), "utf8");
		const account = JSON.parse(readFileSync(join(accountDir(), "account.json"), "utf8")).account_url;
		const oldCopy = join(dir, "old-account");
		cpSync(accountDir(), join(oldCopy, "acme", "pebble"), { recursive: true });

		const r = await certificatee(["acme", "rollover", "--source", "le", "--config", configFile]);
		expect(r.code, r.stdout + r.stderr).toBe(0);
		expect(r.stdout).toContain(account);
		const newKey = readFileSync(join(accountDir(), "account.key"), "utf8");
		expect(newKey).not.toBe(oldKey);
		expect(existsSync(join(accountDir(), "account.next.key"))).toBe(false);
		expect(JSON.parse(readFileSync(join(accountDir(), "account.json"), "utf8")).account_url).toBe(account);
		expect(r.stdout + r.stderr).not.toContain("PRIVATE KEY");

		const renewed = await certificatee(["renew", "web", "--force", "--config", configFile]);
		expect(renewed.code, renewed.stdout + renewed.stderr).toBe(0);
		expect(JSON.parse(readFileSync(join(accountDir(), "account.json"), "utf8")).account_url).toBe(account);

		// The old key, with the same account URL: Pebble no longer knows it.
		const stale = createAcmeIssuer(pebbleConfig(pebble), { stateDir: oldCopy });
		try {
			const attempt = stale.issue(
				{ certificate: "stale", domains: ["stale.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(30_000),
			);
			// Pebble checks the request's signature against the account's key, which is now the new one.
			const error = await attempt.catch((e: unknown) => e);
			expect(isCertificateeError(error)).toBe(true);
			expect(String((error as Error).message)).toMatch(/JWS verification error/);
		} finally {
			await stale.close();
		}
	}, 90_000);
});
