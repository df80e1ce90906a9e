/**
 * `certificatee acme rollover --source le` against a real Pebble: the account keeps its URL, the stored key
 * changes (no next key left behind), a new order then succeeds with the new key, and the old key is no longer
 * accepted by Pebble for that account.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../src/errors.js";
import { createAcmeIssuer } from "../../src/sources/acme/index.js";
import type { AccountRecord } from "../../src/store/records.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { type PebbleHandle, startPebble } from "../harness/pebble.js";
import { stateAt } from "../harness/state.js";
import { pebbleConfig } from "../sources/acme/helpers.js";

let dir: string;
let pebble: PebbleHandle;
let configFile: string;
/** The state store's accounts/le record (file store layout). */
const account = () =>
	(JSON.parse(readFileSync(join(dir, "state", "accounts", "le.json"), "utf8")) as { value: AccountRecord })
		.value;

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
		const oldKey = account().keyPem;
		const accountUrl = account().accountUrl!;
		// The old account, copied into another state directory laid out the way issuers wrote it before the
		// state store kept it (acme/<issuer>/account.key, account.json): opening that store migrates it.
		const oldCopy = join(dir, "old-account");
		mkdirSync(join(oldCopy, "acme", "pebble"), { recursive: true });
		writeFileSync(join(oldCopy, "acme", "pebble", "account.key"), oldKey);
		writeFileSync(
			join(oldCopy, "acme", "pebble", "account.json"),
			JSON.stringify({ directory_url: account().directoryUrl, account_url: accountUrl }),
		);

		const r = await certificatee(["acme", "rollover", "--source", "le", "--config", configFile]);
		expect(r.code, r.stdout + r.stderr).toBe(0);
		expect(r.stdout).toContain(accountUrl);
		const newKey = account().keyPem;
		expect(newKey).not.toBe(oldKey);
		expect(account().nextKeyPem).toBeUndefined();
		expect(account().accountUrl).toBe(accountUrl);
		expect(r.stdout + r.stderr).not.toContain("PRIVATE KEY");

		const renewed = await certificatee(["renew", "web", "--force", "--config", configFile]);
		expect(renewed.code, renewed.stdout + renewed.stderr).toBe(0);
		expect(account().accountUrl).toBe(accountUrl);

		// The old key, with the same account URL: Pebble no longer knows it.
		const stale = createAcmeIssuer(pebbleConfig(pebble), { store: stateAt(oldCopy) });
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
