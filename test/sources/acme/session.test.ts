/**
 * What the orders of one issuer share (session.ts): one directory fetch, the nonces of earlier responses, one
 * parsed account key. Against a real Pebble that rejects a share of good nonces as badNonce.
 *
 * The share and the number of orders are chosen so that neither way this file can fail by chance does. Pebble
 * rejects each good nonce independently with chance p, and the session retries a badNonce 5 times, so a request
 * fails when 6 nonces in a row are rejected (p^6); 48 orders send about 350 requests (~7 each, measured). At
 * p = 20% and 12 orders (~88 requests) that was 88 * 0.2^6, one run in 180, and it failed a CI run. At p = 4%:
 * 350 * 0.04^6 = 1.4e-6 that some order fails, and 0.96^350 = 6e-7 that no nonce is rejected at all (the test
 * asserts that some are).
 */
import { createPublicKey, generateKeyPairSync, verify } from "node:crypto";
import diagnostics from "node:diagnostics_channel";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import acme from "acme-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Secret } from "../../../src/certificates/types.js";
import { isCertificateeError } from "../../../src/errors.js";
import { createAcmeIssuer } from "../../../src/sources/acme/index.js";
import {
	accountSigner,
	attachSession,
	createCaSession,
	SessionHttpClient,
} from "../../../src/sources/acme/session.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { expectValidIssue, pebbleConfig } from "./helpers.js";

/** See the file's comment: low enough that 6 rejections in a row never happen, high enough that some do. */
const NONCE_REJECT_PERCENT = 4;
const ORDERS = 48;

let pebble: PebbleHandle;
let root: string;
let stateDir: string;

beforeAll(async () => {
	pebble = await startPebble({ validation: "always-valid", nonceReject: NONCE_REJECT_PERCENT });
	root = await pebble.root();
	stateDir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-session-"));
});

afterAll(async () => {
	await pebble?.stop();
	await rm(stateDir, { recursive: true, force: true });
});

interface Exchanges {
	/** The requests sent to Pebble, as "METHOD path". */
	sent: string[];
	/** The HTTP status of each answer. */
	statuses: number[];
}

/** The HTTP exchanges of this process with Pebble while `run` runs (undici's diagnostics channels). */
async function exchangesDuring<T>(run: () => Promise<T>): Promise<{ result: T } & Exchanges> {
	const origin = new URL(pebble.directoryUrl).origin;
	const seen: Exchanges = { sent: [], statuses: [] };
	type Message = {
		request: { origin: string; method: string; path: string };
		response?: { statusCode: number };
	};
	const onCreate = (message: unknown) => {
		const { request } = message as Message;
		if (String(request.origin) === origin) seen.sent.push(`${request.method} ${request.path}`);
	};
	const onHeaders = (message: unknown) => {
		const { request, response } = message as Message;
		if (String(request.origin) === origin && response) seen.statuses.push(response.statusCode);
	};
	diagnostics.subscribe("undici:request:create", onCreate);
	diagnostics.subscribe("undici:request:headers", onHeaders);
	try {
		return { result: await run(), ...seen };
	} finally {
		diagnostics.unsubscribe("undici:request:create", onCreate);
		diagnostics.unsubscribe("undici:request:headers", onHeaders);
	}
}

describe("one issuer's orders share a CA session", () => {
	it("48 concurrent orders all succeed through badNonce rejections, with one directory fetch and a nonce HEAD only while none is kept", async () => {
		const concurrency = 4;
		const issuer = createAcmeIssuer(pebbleConfig(pebble, { name: "shared", concurrency }), {
			store: stateAt(stateDir),
		});
		try {
			const names = Array.from({ length: ORDERS }, (_, i) => `s${i}.session.test`);
			const {
				result: settled,
				sent,
				statuses,
			} = await exchangesDuring(() =>
				// allSettled: an order that fails must not leave the others running (and the HTTP-01 responder's port
				// taken) into the next test.
				Promise.allSettled(
					names.map((n) =>
						issuer.issue(
							{ certificate: n, domains: [n], keyType: "ecdsa-p256" },
							AbortSignal.timeout(60_000),
						),
					),
				),
			);
			const issued = settled.map((r) => {
				if (r.status === "rejected") throw r.reason;
				return r.value;
			});
			for (const [i, n] of names.entries()) expectValidIssue(issued[i]!, root, [n]);
			const directoryPath = new URL(pebble.directoryUrl).pathname;
			expect(sent.filter((r) => r === `GET ${directoryPath}`)).toHaveLength(1);
			const posts = sent.filter((r) => r.startsWith("POST ")).length;
			const heads = sent.filter((r) => r.startsWith("HEAD ")).length;
			// acme-client alone sends one HEAD newNonce before every POST; here only the account registration and
			// the first requests of the first `concurrency` orders find no nonce kept (a badNonce carries a new one).
			expect(posts).toBeGreaterThanOrEqual(ORDERS * 6);
			expect(heads).toBeLessThanOrEqual(concurrency + 1);
			// Pebble really rejected nonces (400 badNonce; 4% of ~350 requests), and every order went through.
			expect(statuses.filter((s) => s === 400).length).toBeGreaterThan(0);
		} finally {
			await issuer.close();
		}
	});
});

describe("the order's own CSR", () => {
	// IPv6 only: Pebble 2.4 answers every IPv4 identifier's finalize with "CSR is missing Order IP" (acme-client's
	// CSR too); csr.test.ts checks the IPv4 encoding against openssl.
	it("a DNS name and an IP identifier (RFC 8738) end up in the issued certificate", async () => {
		const issuer = createAcmeIssuer(pebbleConfig(pebble, { name: "ip" }), { store: stateAt(stateDir) });
		try {
			const names = ["ip.session.test", "2001:db8::10"];
			const issued = await issuer.issue(
				{ certificate: "ip", domains: names, keyType: "ecdsa-p256" },
				AbortSignal.timeout(60_000),
			);
			const leaf = expectValidIssue(issued, root, ["ip.session.test"]);
			expect(leaf.checkIP("2001:db8::10")).toBeDefined();
			expect(leaf.subject).toContain("CN=ip.session.test");
		} finally {
			await issuer.close();
		}
	});
});

describe("accountSigner", () => {
	for (const type of ["ec-P-256", "ec-P-384", "rsa"] as const) {
		it(`${type}: one parsed key per Secret, and its JWS signatures verify against the JWK it publishes`, async () => {
			const { privateKey } =
				type === "rsa"
					? generateKeyPairSync("rsa", { modulusLength: 2048 })
					: generateKeyPairSync("ec", { namedCurve: type.slice(3) });
			const secret = new Secret(privateKey.export({ type: "pkcs8", format: "pem" }).toString());
			const signer = accountSigner(secret);
			expect(accountSigner(secret)).toBe(signer);
			expect(accountSigner(new Secret(secret.reveal()))).not.toBe(signer);
			// JWK members in lexicographic order (RFC 7638 thumbprints hash this serialisation).
			expect(Object.keys(signer.jwk)).toEqual(Object.keys(signer.jwk).sort());
			expect(signer.alg).toBe({ "ec-P-256": "ES256", "ec-P-384": "ES384", rsa: "RS256" }[type]);

			const session = createCaSession(pebble.directoryUrl, {
				dispatcher: undefined as never,
				retries: 0,
				requestTimeoutMs: 1000,
				retryDelayMs: 1,
			});
			const http = new SessionHttpClient(session, signer, undefined, {
				signal: AbortSignal.timeout(1000),
				problems: [],
			});
			const jws = http.createSignedBody("https://ca.test/new-order", { a: 1 }, { nonce: "n1", kid: "k" });
			const header = JSON.parse(Buffer.from(jws.protected, "base64url").toString());
			expect(header).toEqual({ alg: signer.alg, url: "https://ca.test/new-order", nonce: "n1", kid: "k" });
			const publicKey = createPublicKey({ key: signer.jwk, format: "jwk" });
			const ok = verify(
				signer.hash,
				Buffer.from(`${jws.protected}.${jws.payload}`),
				{ key: publicKey, dsaEncoding: "ieee-p1363" },
				Buffer.from(jws.signature!, "base64url"),
			);
			expect(ok).toBe(true);
		});
	}
});

describe("attachSession", () => {
	it("replaces the HttpClient of acme-client 5.4's Client and its AcmeApi, and refuses a client without them", () => {
		const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
		const key = new Secret(privateKey.export({ type: "pkcs8", format: "pem" }).toString());
		const session = createCaSession("https://ca.test/dir", {
			dispatcher: undefined as never,
			retries: 0,
			requestTimeoutMs: 1000,
			retryDelayMs: 1,
		});
		const ctx = { signal: AbortSignal.timeout(1000), problems: [] };
		const client = new acme.Client({ directoryUrl: "https://ca.test/dir", accountKey: key.reveal() });
		const http = attachSession(client, session, accountSigner(key), undefined, ctx);
		const inner = client as unknown as { http: unknown; api: { http: unknown } };
		expect(inner.http).toBe(http);
		expect(inner.api.http).toBe(http);
		const error = (() => {
			try {
				attachSession({} as acme.Client, session, accountSigner(key), undefined, ctx);
			} catch (e) {
				return e;
			}
		})();
		expect(isCertificateeError(error, "INTERNAL")).toBe(true);
	});
});
