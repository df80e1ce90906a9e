/** The ACME issuer against a real Pebble that really validates HTTP-01 (names resolve through challtestsrv). */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import { type AcmeIssuer, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import type { KeyType } from "../../../src/sources/types.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { closeStateAt, stateAt } from "../../harness/state.js";
import { expectValidIssue, pebbleConfig } from "./helpers.js";

let pebble: PebbleHandle;
let root: string;
let stateDir: string;
const issuers: AcmeIssuer[] = [];
const signal = () => AbortSignal.timeout(30_000);

function issuer(extra: Record<string, unknown> = {}, dir = stateDir): AcmeIssuer {
	const created = createAcmeIssuer(pebbleConfig(pebble, extra), { store: stateAt(dir) });
	issuers.push(created);
	return created;
}

beforeAll(async () => {
	pebble = await startPebble({ validation: "real", domainBlocklist: ["blocked.test"] });
	root = await pebble.root();
	stateDir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-"));
});

afterAll(async () => {
	await Promise.all(issuers.map((i) => i.close()));
	await pebble?.stop();
	await rm(stateDir, { recursive: true, force: true });
});

describe("ACME issuer over real HTTP-01", () => {
	it("issues several certificates concurrently; each chain verifies to Pebble's root and matches its key", async () => {
		const acme = issuer();
		const requests = [
			{ certificate: "shop", domains: ["shop.test", "www.shop.test", "api.shop.test"] },
			{ certificate: "blog", domains: ["blog.test"] },
			{ certificate: "mail", domains: ["MAIL.test", "mail.test"] },
		];
		const t0 = performance.now();
		const issued = await Promise.all(
			requests.map((r) => acme.issue({ ...r, keyType: "ecdsa-p256" }, signal())),
		);
		console.log(
			`3 certificates (5 names) over real HTTP-01 in ${((performance.now() - t0) / 1000).toFixed(2)} s`,
		);
		expectValidIssue(issued[0]!, root, ["shop.test", "www.shop.test", "api.shop.test"]);
		expectValidIssue(issued[1]!, root, ["blog.test"]);
		const mail = expectValidIssue(issued[2]!, root, ["mail.test"]);
		expect(mail.subjectAltName).toBe("DNS:mail.test");
		expect(mail.subject).toContain("CN=mail.test");
		expect(new Set(issued.map((i) => i.keyPem)).size).toBe(3);
		// Pebble really asked: validation went through our responder, which is closed again afterwards.
		await expect(fetch(`http://127.0.0.1:${pebble.httpPort}/.well-known/acme-challenge/x`)).rejects.toThrow();
	});

	it("creates the account once (key 0600) and a second issuer on the same state dir reuses it untouched", async () => {
		const dir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-account-"));
		try {
			await issuer({ name: "reuse" }, dir).issue(
				{ certificate: "one", domains: ["one.reuse.test"], keyType: "ecdsa-p256" },
				signal(),
			);
			// The account is the state store's accounts/reuse record: one 0600 file with the key and the URLs.
			const file = path.join(dir, "accounts", "reuse.json");
			const before = await stat(file);
			expect(before.mode & 0o777).toBe(0o600);
			const meta = JSON.parse(await readFile(file, "utf8")).value as {
				keyPem: string;
				accountUrl: string;
				directoryUrl: string;
			};
			expect(createPrivateKey(meta.keyPem).asymmetricKeyType).toBe("ec");
			expect(meta.directoryUrl).toBe(pebble.directoryUrl);
			expect(meta.accountUrl).toMatch(/^https:\/\/localhost:\d+\/my-account\//);

			const issued = await issuer({ name: "reuse" }, dir).issue(
				{ certificate: "two", domains: ["two.reuse.test"], keyType: "ecdsa-p256" },
				signal(),
			);
			expectValidIssue(issued, root, ["two.reuse.test"]);
			const after = await stat(file);
			expect(after.ino).toBe(before.ino);
			expect(after.mtimeMs).toBe(before.mtimeMs);
			expect(JSON.parse(await readFile(file, "utf8")).value).toEqual(meta);
		} finally {
			await closeStateAt(dir);
			await rm(dir, { recursive: true, force: true });
		}
	});

	it("issues every key type, a new key each time", async () => {
		const acme = issuer({ concurrency: 4 });
		const expected: Record<KeyType, { type: string; detail: string | number | undefined }> = {
			"ecdsa-p256": { type: "ec", detail: "prime256v1" },
			"ecdsa-p384": { type: "ec", detail: "secp384r1" },
			"rsa-2048": { type: "rsa", detail: 2048 },
			"rsa-4096": { type: "rsa", detail: 4096 },
		};
		const types = Object.keys(expected) as KeyType[];
		const issued = await Promise.all(
			types.map((keyType) =>
				acme.issue({ certificate: keyType, domains: [`${keyType}.keys.test`], keyType }, signal()),
			),
		);
		for (const [i, keyType] of types.entries()) {
			const leaf = expectValidIssue(issued[i]!, root, [`${keyType}.keys.test`]);
			const details = leaf.publicKey.asymmetricKeyDetails;
			expect(leaf.publicKey.asymmetricKeyType).toBe(expected[keyType].type);
			expect(details?.namedCurve ?? details?.modulusLength).toBe(expected[keyType].detail);
		}
	});

	it("reports a failed challenge with the CA's problem type and detail", async () => {
		await pebble.challtestsrv!.addA("unreachable.test", ["127.0.0.2"]);
		const t0 = performance.now();
		const error = await issuer()
			.issue({ certificate: "unreachable", domains: ["unreachable.test"], keyType: "ecdsa-p256" }, signal())
			.catch((e: unknown) => e);
		console.log(`failed challenge reported in ${((performance.now() - t0) / 1000).toFixed(2)} s`);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.context.problem).toBe("urn:ietf:params:acme:error:connection");
		expect(error.message).toContain("127.0.0.2");
		expect(error.message).toContain("urn:ietf:params:acme:error:connection");
		expect(error.context.certificate).toBe("unreachable");
		expect(error.context.operation).toBe("http-01 validation of unreachable.test");
		expect(error.hint).toContain(`127.0.0.1:${pebble.httpPort}`);
		expect(error.retryable).toBe(true);
	});

	it("reports a rejected order (a name the CA refuses) as permanent, with the problem detail", async () => {
		const error = await issuer()
			.issue(
				{ certificate: "blocked", domains: ["ok.test", "blocked.test"], keyType: "ecdsa-p256" },
				signal(),
			)
			.catch((e: unknown) => e);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.context.problem).toBe("urn:ietf:params:acme:error:rejectedIdentifier");
		expect(error.context.operation).toBe("new order");
		expect(error.message).toContain("blocked.test");
		expect(error.retryable).toBe(false);
	});

	it("refuses a CA whose HTTPS it cannot verify, at once, naming ca_file", async () => {
		const t0 = performance.now();
		const error = await issuer({ ca_file: undefined, name: "untrusted" })
			.issue({ certificate: "x", domains: ["x.test"], keyType: "ecdsa-p256" }, signal())
			.catch((e: unknown) => e);
		expect(performance.now() - t0).toBeLessThan(10_000);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.message).toContain("not trusted");
		expect(error.hint).toContain("ca_file");
		expect(error.retryable).toBe(false);
	});

	it("leaves the key out of everything but keyPem", async () => {
		const issued = await issuer().issue(
			{ certificate: "k", domains: ["k.test"], keyType: "ecdsa-p256" },
			signal(),
		);
		expect(issued.certPem).not.toContain("PRIVATE KEY");
		expect(issued.chainPem).not.toContain("PRIVATE KEY");
		expect(issued.keyPem).toContain("BEGIN PRIVATE KEY");
		expect(new X509Certificate(issued.certPem).ca).toBe(false);
	});

	it("renewalWindow is undefined on Pebble 2.4, whose directory has no renewalInfo", async () => {
		const acme = issuer();
		const issued = await acme.issue(
			{ certificate: "ari", domains: ["ari.test"], keyType: "ecdsa-p256" },
			signal(),
		);
		expect(await acme.renewalWindow(issued.certPem, signal())).toBeUndefined();
	});
});
