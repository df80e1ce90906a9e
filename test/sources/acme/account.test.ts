/** Accounts and reachability: External Account Binding against Pebble, and a CA that went away. */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import { type AcmeIssuer, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { expectValidIssue, pebbleConfig } from "./helpers.js";

let dir: string;
const issuers: AcmeIssuer[] = [];
const pebbles: PebbleHandle[] = [];

function issuer(pebble: PebbleHandle, extra: Record<string, unknown>): AcmeIssuer {
	const created = createAcmeIssuer(pebbleConfig(pebble, extra), { store: stateAt(dir) });
	issuers.push(created);
	return created;
}

beforeAll(async () => {
	dir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-account-"));
});

afterAll(async () => {
	await Promise.all(issuers.map((i) => i.close()));
	await Promise.all(pebbles.map((p) => p.stop()));
	await rm(dir, { recursive: true, force: true });
});

describe("External Account Binding", () => {
	const hmac = randomBytes(32).toString("base64url");
	let pebble: PebbleHandle;
	beforeAll(async () => {
		pebble = await startPebble({ validation: "always-valid", externalAccountMACKeys: { "kid-1": hmac } });
		pebbles.push(pebble);
	});

	it("without EAB, registration fails with externalAccountRequired and a hint to set eab", async () => {
		const error = await issuer(pebble, { name: "no-eab" })
			.issue(
				{ certificate: "a", domains: ["a.eab.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(20_000),
			)
			.catch((e: unknown) => e);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.context.problem).toBe("urn:ietf:params:acme:error:externalAccountRequired");
		expect(error.context.operation).toBe("account registration");
		expect(error.hint).toContain("eab.kid");
		expect(error.retryable).toBe(false);
	});

	it("with a wrong HMAC key, registration fails with the CA's problem", async () => {
		const error = await issuer(pebble, {
			name: "bad-eab",
			eab: { kid: "kid-1", hmac_key: randomBytes(32).toString("base64url") },
		})
			.issue(
				{ certificate: "a", domains: ["a.eab.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(20_000),
			)
			.catch((e: unknown) => e);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.context.problem).toMatch(/^urn:ietf:params:acme:error:/);
		expect(error.message).not.toContain(hmac);
	});

	it("with the key id and HMAC key from a file, it registers and issues", async () => {
		const keyFile = path.join(dir, "eab.key");
		await writeFile(keyFile, `${hmac}\n`, { mode: 0o600 });
		const issued = await issuer(pebble, { name: "eab", eab: { kid: "kid-1", hmac_key_file: keyFile } }).issue(
			{ certificate: "a", domains: ["a.eab.test"], keyType: "ecdsa-p256" },
			AbortSignal.timeout(20_000),
		);
		expectValidIssue(issued, await pebble.root(), ["a.eab.test"]);
	});

	it("an unreadable hmac_key_file is a config error naming the field", () => {
		let error: unknown;
		try {
			createAcmeIssuer(
				pebbleConfig(pebble, { eab: { kid: "k", hmac_key_file: path.join(dir, "missing") } }),
				{
					store: stateAt(dir),
				},
			);
		} catch (e) {
			error = e;
		}
		expect(isCertificateeError(error, "CONFIG_SECRET_UNREADABLE")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.context.field).toBe("eab.hmac_key_file");
		expect(error.message).toContain("ENOENT");
	});
});

describe("a CA that is down", () => {
	it("fails within seconds with ACME_ERROR naming the server, not after acme-client's ~75 s of retries (the 20 s signal would turn that into ISSUE_FAILED)", async () => {
		const pebble = await startPebble({ validation: "always-valid" });
		pebbles.push(pebble);
		const acme = issuer(pebble, { name: "down" });
		const before = await acme.issue(
			{ certificate: "up", domains: ["up.test"], keyType: "ecdsa-p256" },
			AbortSignal.timeout(20_000),
		);
		expectValidIssue(before, await pebble.root(), ["up.test"]);
		await pebble.kill();
		const t0 = performance.now();
		const error = await acme
			.issue(
				{ certificate: "down", domains: ["down.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(20_000),
			)
			.catch((e: unknown) => e);
		const seconds = (performance.now() - t0) / 1000;
		console.log(`CA down reported in ${seconds.toFixed(2)} s`);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.message).toContain(`is unreachable: ECONNREFUSED`);
		expect(error.message).toContain(pebble.directoryUrl.replace(/\/dir$/, ""));
		expect(error.context.certificate).toBe("down");
		expect(error.retryable).toBe(true);
		expect(error.hint).toContain("directory_url");
	});
});
