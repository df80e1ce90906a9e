/**
 * The embedded local CA: on first use it creates an ECDSA P-256 root, kept as the state store's
 * `authorities/<name>` record (certificate and key in one atomic write, so a crash never leaves half a CA; the
 * file store keeps it 0600), then signs leaf certificates directly with it. Clients trust it through exportRoot().
 */
import "reflect-metadata";
import { randomBytes, webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import {
	authorityKey,
	readAuthorityRecord,
	readRevocations,
	writeAuthorityRecord,
	writeRevocations,
} from "../../store/records.js";
import type { StateStore } from "../../store/types.js";
import type { IssuedPem, IssueRequest, Issuer, KeyType } from "../types.js";

import { type LocalCaSourceConfig, localCaSourceSchema } from "./schema.js";

export { type LocalCaSourceConfig, localCaSourceSchema };

const crypto = webcrypto as Crypto;
const CA_ALGORITHM = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGNING = { name: "ECDSA", hash: "SHA-256" } as const;

export interface LocalCaDeps {
	/** The state store; the CA is its `authorities/<name>` record, revocations `revocations/<name>`. */
	store: StateStore;
	/** Dates of issued certificates; defaults to the system clock. */
	clock?: () => Date;
}

export interface LocalCaIssuer extends Issuer {
	/** The CA certificate (PEM) clients should trust; creates the CA when it does not exist yet. */
	exportRoot(): Promise<string>;
}

interface Ca {
	cert: x509.X509Certificate;
	certPem: string;
	key: CryptoKey;
}

function keyParams(keyType: KeyType): EcKeyGenParams | RsaHashedKeyGenParams {
	switch (keyType) {
		case "ecdsa-p256":
			return { name: "ECDSA", namedCurve: "P-256" };
		case "ecdsa-p384":
			return { name: "ECDSA", namedCurve: "P-384" };
		case "rsa-2048":
		case "rsa-4096":
			return {
				name: "RSASSA-PKCS1-v1_5",
				modulusLength: keyType === "rsa-2048" ? 2048 : 4096,
				publicExponent: new Uint8Array([1, 0, 1]),
				hash: "SHA-256",
			};
	}
}

/** 16 random bytes, positive and without a leading zero byte. */
function serial(): string {
	const bytes = randomBytes(16);
	bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x10;
	return bytes.toString("hex");
}

async function exportKeyPem(key: CryptoKey): Promise<string> {
	return x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

/** Where the record lives, for messages an operator acts on. */
function where(store: StateStore, name: string): string {
	return store.location?.(authorityKey(name)) ?? `state record ${authorityKey(name)}`;
}

async function loadCa(store: StateStore, name: string): Promise<Ca | undefined> {
	const record = await readAuthorityRecord(store, name);
	if (!record) return undefined;
	const { certPem, keyPem } = record.value;
	const corrupt = (what: string, e: unknown) =>
		new CertificateeError(
			"STATE_CORRUPT",
			`${where(store, name)} does not hold a valid CA ${what}: ${describeError(e)}`,
			{
				context: { ...(store.location ? { file: where(store, name) } : {}), operation: "read local CA" },
				hint: `restore it from a backup; or delete it to create a new CA (clients must then trust the new root: certificatee ca export)`,
				cause: e,
			},
		);
	let key: CryptoKey;
	try {
		const der = x509.PemConverter.decodeFirst(keyPem);
		key = await crypto.subtle.importKey("pkcs8", der, CA_ALGORITHM, false, ["sign"]);
	} catch (e) {
		throw corrupt("key", e);
	}
	let cert: x509.X509Certificate;
	try {
		cert = new x509.X509Certificate(certPem);
	} catch (e) {
		throw corrupt("certificate", e);
	}
	return { cert, certPem, key };
}

async function createCa(store: StateStore, config: LocalCaSourceConfig, now: Date): Promise<Ca> {
	const keys = (await crypto.subtle.generateKey(CA_ALGORITHM, true, ["sign", "verify"])) as CryptoKeyPair;
	const cert = await x509.X509CertificateGenerator.createSelfSigned(
		{
			serialNumber: serial(),
			name: `CN=${config.ca_common_name.replace(/[,=+<>#;\\"]/g, " ")}`,
			notBefore: new Date(now.getTime() - 60_000),
			notAfter: new Date(now.getTime() + config.ca_lifetime),
			keys,
			signingAlgorithm: SIGNING,
			extensions: [
				new x509.BasicConstraintsExtension(true, 0, true),
				new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
				await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
			],
		},
		crypto,
	);
	const certPem = cert.toString("pem");
	try {
		// Version 0: only if no CA exists; the record (key and certificate together) is written atomically.
		await writeAuthorityRecord(
			store,
			config.name,
			{ certPem, keyPem: await exportKeyPem(keys.privateKey) },
			0,
		);
	} catch (e) {
		// Another writer created it first: use that one.
		const existing = isCertificateeError(e, "STATE_CONFLICT") ? await loadCa(store, config.name) : undefined;
		if (existing) return existing;
		throw e;
	}
	return { cert, certPem, key: keys.privateKey };
}

async function issueLeaf(ca: Ca, request: IssueRequest, notBefore: Date, notAfter: Date): Promise<IssuedPem> {
	const keys = (await crypto.subtle.generateKey(keyParams(request.keyType), true, [
		"sign",
		"verify",
	])) as CryptoKeyPair;
	const sans = request.domains.map((name) =>
		/^[0-9.]+$/.test(name) || name.includes(":")
			? { type: "ip" as const, value: name }
			: { type: "dns" as const, value: name },
	);
	const usage =
		request.keyType.startsWith("rsa") === true
			? x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment
			: x509.KeyUsageFlags.digitalSignature;
	const cert = await x509.X509CertificateGenerator.create(
		{
			serialNumber: serial(),
			subject: `CN=${(request.domains[0] ?? request.certificate).replace(/[,=+<>#;\\"]/g, " ")}`,
			issuer: ca.cert.subject,
			notBefore,
			notAfter,
			publicKey: keys.publicKey,
			signingKey: ca.key,
			signingAlgorithm: SIGNING,
			extensions: [
				new x509.BasicConstraintsExtension(false, undefined, true),
				new x509.KeyUsagesExtension(usage, true),
				new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
				new x509.SubjectAlternativeNameExtension(sans),
				await x509.AuthorityKeyIdentifierExtension.create(ca.cert, false, crypto),
				await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
			],
		},
		crypto,
	);
	return { certPem: cert.toString("pem"), chainPem: "", keyPem: await exportKeyPem(keys.privateKey) };
}

export function createLocalCaIssuer(config: LocalCaSourceConfig, deps: LocalCaDeps): LocalCaIssuer {
	const { store } = deps;
	const clock = deps.clock ?? (() => new Date());
	let ca: Promise<Ca> | undefined;

	function ensureCa(): Promise<Ca> {
		ca ??= (async () => (await loadCa(store, config.name)) ?? (await createCa(store, config, clock())))();
		// A failure (unwritable directory) must not stick: the next call tries again.
		ca.catch(() => {
			ca = undefined;
		});
		return ca;
	}

	return {
		name: config.name,
		async issue(request, signal) {
			signal.throwIfAborted();
			try {
				const authority = await ensureCa();
				const lifetime = request.lifetimeMs ?? config.lifetime;
				// Backdate a little for clock skew, but never by more than a tenth of a short demo lifetime.
				const now = clock().getTime();
				const notBefore = new Date(now - Math.min(60_000, Math.floor(lifetime / 10)));
				return await issueLeaf(authority, request, notBefore, new Date(now + lifetime));
			} catch (e) {
				if (isCertificateeError(e, "STATE_CORRUPT")) throw e; // names the record and says what to do
				throw new CertificateeError(
					"ISSUE_FAILED",
					`local CA "${config.name}" could not issue "${request.certificate}": ${describeError(e)}`,
					{
						context: {
							certificate: request.certificate,
							...(store.location ? { file: where(store, config.name) } : {}),
						},
						hint: "check that the state directory is writable and on a local filesystem",
						retryable: true,
						cause: e,
					},
				);
			}
		},
		async exportRoot() {
			return (await ensureCa()).certPem;
		},
		async revoke(certPem, reason, signal) {
			signal.throwIfAborted();
			// A private CA has no CRL or OCSP responder here: the revocation is recorded for the operator to act on.
			const cert = new x509.X509Certificate(certPem);
			const previous = await readRevocations(store, config.name);
			const entry = {
				serial: cert.serialNumber,
				subject: cert.subject,
				reason,
				revokedAt: clock().toISOString(),
			};
			const revoked = [...(previous?.value.revoked ?? []), entry];
			await writeRevocations(store, config.name, { revoked }, previous?.version ?? 0);
		},
	};
}
