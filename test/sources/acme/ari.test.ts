/** ARI (RFC 9773): certID, and renewalWindow() against recorded CA responses (Pebble 2.4 has no ARI). */
import "reflect-metadata";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import * as x509 from "@peculiar/x509";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import {
	type AcmeIssuer,
	acmeSourceSchema,
	ariCertId,
	createAcmeIssuer,
} from "../../../src/sources/acme/index.js";
import {
	type AriServer,
	type AriServerOptions,
	recordedProblem,
	recordedWindow,
	startAriServer,
} from "../../harness/ari-server.js";
import { createTestCa, generateKeys, type TestIssuer } from "../../harness/certs.js";
import { stateAt } from "../../harness/state.js";

let ca: TestIssuer;
let stateDir: string;
let server: AriServer | undefined;
let issuer: AcmeIssuer | undefined;

/** A leaf with a chosen serial and Authority Key Identifier. */
async function leafWith(serial: string, akiHex?: string): Promise<string> {
	const keys = await generateKeys("ec-p256");
	const cert = await x509.X509CertificateGenerator.create({
		serialNumber: serial,
		subject: "CN=ari.test",
		issuer: ca.cert.subject,
		notBefore: new Date(Date.now() - 60_000),
		notAfter: new Date(Date.now() + 90 * 86_400_000),
		publicKey: keys.publicKey,
		signingKey: ca.keys.privateKey,
		signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
		extensions: akiHex ? [new x509.AuthorityKeyIdentifierExtension(akiHex)] : [],
	});
	return cert.toString("pem");
}

async function issuerFor(
	options: AriServerOptions,
	extra: Record<string, unknown> = {},
): Promise<AcmeIssuer> {
	server = await startAriServer(options);
	issuer = createAcmeIssuer(
		acmeSourceSchema.parse({
			name: "ari",
			type: "acme",
			directory_url: server.directoryUrl,
			ca_file: server.caFile,
			http_retries: 0,
			...extra,
		}),
		{ store: stateAt(stateDir) },
	);
	return issuer;
}

beforeAll(async () => {
	ca = await createTestCa("ari test CA");
	stateDir = await mkdtemp(path.join(tmpdir(), "certificatee-ari-state-"));
});

afterEach(async () => {
	await issuer?.close();
	await server?.stop();
	issuer = undefined;
	server = undefined;
});

afterAll(async () => {
	await rm(stateDir, { recursive: true, force: true });
});

// RFC 9773 §4.1 example: AKI 69:88:5B:6B:87:46:40:41:E1:B3:7B:84:7B:A0:AE:2C:DE:01:C8:D4, serial 00:87:65:43:21.
const RFC_AKI = "69885b6b87464041e1b37b847ba0ae2cde01c8d4";

describe("ariCertId", () => {
	it("matches the RFC 9773 example (serial needing a leading zero byte)", async () => {
		expect(ariCertId(await leafWith("0087654321", RFC_AKI))).toBe("aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE");
	});

	it("keeps a serial whose top bit is clear as is", async () => {
		const id = ariCertId(await leafWith("0102030405", RFC_AKI));
		expect(id).toBe(`aYhba4dGQEHhs3uEe6CuLN4ByNQ.${Buffer.from("0102030405", "hex").toString("base64url")}`);
	});

	it("refuses a certificate without an Authority Key Identifier", async () => {
		const pem = await leafWith("0107");
		expect(() => ariCertId(pem)).toThrow(/no Authority Key Identifier/);
	});
});

describe("renewalWindow against recorded responses", () => {
	it("returns the CA's suggested window when the directory advertises renewalInfo", async () => {
		const pem = await leafWith("0087654321", RFC_AKI);
		const acme = await issuerFor({
			renewalInfo: {
				"aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE": recordedWindow("2025-01-02T04:00:00Z", "2025-01-03T04:00:00Z"),
			},
		});
		const window = await acme.renewalWindow(pem, AbortSignal.timeout(10_000));
		expect(window).toEqual({
			start: new Date("2025-01-02T04:00:00Z"),
			end: new Date("2025-01-03T04:00:00Z"),
		});
		expect(server?.requests).toEqual([
			"/directory",
			"/draft-ietf-acme-ari-03/renewalInfo/aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE",
		]);
	});

	it("returns undefined, asking nothing more, when the directory has no renewalInfo", async () => {
		const acme = await issuerFor({ advertise: false });
		expect(
			await acme.renewalWindow(await leafWith("0102", RFC_AKI), AbortSignal.timeout(10_000)),
		).toBeUndefined();
		expect(server?.requests).toEqual(["/directory"]);
	});

	it("returns undefined for a certificate the CA does not know (404)", async () => {
		const acme = await issuerFor({});
		expect(
			await acme.renewalWindow(await leafWith("0103", RFC_AKI), AbortSignal.timeout(10_000)),
		).toBeUndefined();
	});

	it("reports a window that ends before it starts as ACME_ERROR naming the endpoint", async () => {
		const pem = await leafWith("0104", RFC_AKI);
		const acme = await issuerFor({
			renewalInfo: { [ariCertId(pem)]: recordedWindow("2025-01-03T04:00:00Z", "2025-01-02T04:00:00Z") },
		});
		const error = await acme.renewalWindow(pem, AbortSignal.timeout(10_000)).catch((e: unknown) => e);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.message).toContain("ends before it starts");
		expect(error.context.endpoint).toContain(ariCertId(pem));
	});

	it("reports a malformed body and a server problem with their details", async () => {
		const bad = await leafWith("0105", RFC_AKI);
		const failing = await leafWith("0106", RFC_AKI);
		const acme = await issuerFor({
			renewalInfo: {
				[ariCertId(bad)]: {
					status: 200,
					headers: { "content-type": "application/json" },
					body: '{"window":1}',
				},
				[ariCertId(failing)]: recordedProblem(500, "serverInternal", "renewal info unavailable"),
			},
		});
		const malformed = await acme.renewalWindow(bad, AbortSignal.timeout(10_000)).catch((e: unknown) => e);
		expect(isCertificateeError(malformed, "ACME_ERROR")).toBe(true);
		expect((malformed as Error).message).toContain("malformed");
		const problem = await acme.renewalWindow(failing, AbortSignal.timeout(10_000)).catch((e: unknown) => e);
		expect(isCertificateeError(problem, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(problem)) return;
		expect(problem.message).toContain("HTTP 500: renewal info unavailable");
		expect(problem.context.problem).toBe("urn:ietf:params:acme:error:serverInternal");
		expect(problem.retryable).toBe(true);
	});
});
