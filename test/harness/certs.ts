/**
 * Test certificates made in-process (@peculiar/x509 over WebCrypto): a CA, intermediates and leaves
 * with any names, dates, serials and key types, so every test builds exactly the bundle it needs.
 */
import "reflect-metadata";
import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as Crypto);

export type TestKeyType = "ec-p256" | "ec-p384" | "rsa-2048";

export interface TestIssuer {
	certPem: string;
	keyPem: string;
	cert: x509.X509Certificate;
	keys: CryptoKeyPair;
	name: string;
}

export interface TestLeaf {
	certPem: string;
	keyPem: string;
	/** Intermediates, leaf-to-root order, without the root. */
	chainPem: string;
	/** leaf + chain + key: the HAProxy combined form. */
	combinedPem: string;
	serial: string;
}

const DAY = 86_400_000;

function algorithm(keyType: TestKeyType): RsaHashedKeyGenParams | EcKeyGenParams {
	switch (keyType) {
		case "ec-p256":
			return { name: "ECDSA", namedCurve: "P-256" };
		case "ec-p384":
			return { name: "ECDSA", namedCurve: "P-384" };
		case "rsa-2048":
			return {
				name: "RSASSA-PKCS1-v1_5",
				modulusLength: 2048,
				publicExponent: new Uint8Array([1, 0, 1]),
				hash: "SHA-256",
			};
	}
}

function signingAlgorithm(issuerKeys: CryptoKeyPair): EcdsaParams | Algorithm {
	return issuerKeys.privateKey.algorithm.name === "ECDSA"
		? ({ name: "ECDSA", hash: "SHA-256" } as EcdsaParams)
		: { name: "RSASSA-PKCS1-v1_5" };
}

export async function generateKeys(keyType: TestKeyType = "ec-p256"): Promise<CryptoKeyPair> {
	return (await webcrypto.subtle.generateKey(algorithm(keyType), true, ["sign", "verify"])) as CryptoKeyPair;
}

export async function keyToPem(key: CryptoKey): Promise<string> {
	const der = await webcrypto.subtle.exportKey("pkcs8", key);
	return x509.PemConverter.encode(der, "PRIVATE KEY");
}

let serialCounter = 0x1000;
/** A fresh, positive, even-length serial in hex. */
export function nextSerial(): string {
	serialCounter += 1;
	const random = Math.floor(Math.random() * 0xffff)
		.toString(16)
		.padStart(4, "0");
	return `${(serialCounter % 0xffff).toString(16).padStart(4, "0")}${random}`
		.toUpperCase()
		.replace(/^0+/, "1");
}

export async function createTestCa(
	name = "certificatee test root",
	options: { issuer?: TestIssuer; keyType?: TestKeyType; keys?: CryptoKeyPair } = {},
): Promise<TestIssuer> {
	// Same keys and name under another issuer: a cross-signed twin of an intermediate.
	const keys = options.keys ?? (await generateKeys(options.keyType ?? "ec-p256"));
	const now = Date.now();
	const subject = `CN=${name}`;
	const cert = options.issuer
		? await x509.X509CertificateGenerator.create({
				serialNumber: nextSerial(),
				subject,
				issuer: options.issuer.cert.subject,
				notBefore: new Date(now - DAY),
				notAfter: new Date(now + 3650 * DAY),
				publicKey: keys.publicKey,
				signingKey: options.issuer.keys.privateKey,
				signingAlgorithm: signingAlgorithm(options.issuer.keys),
				extensions: [
					new x509.BasicConstraintsExtension(true, undefined, true),
					new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
					await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
				],
			})
		: await x509.X509CertificateGenerator.createSelfSigned({
				serialNumber: nextSerial(),
				name: subject,
				notBefore: new Date(now - DAY),
				notAfter: new Date(now + 3650 * DAY),
				keys,
				signingAlgorithm: signingAlgorithm(keys),
				extensions: [
					new x509.BasicConstraintsExtension(true, undefined, true),
					new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
					await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
				],
			});
	return {
		certPem: pem(cert.toString("pem")),
		keyPem: pem(await keyToPem(keys.privateKey)),
		cert,
		keys,
		name,
	};
}

export interface LeafOptions {
	/** DNS names (and IP addresses, recognised by shape). The first is the CN unless `cn` is given. */
	names: string[];
	cn?: string;
	notBefore?: Date;
	notAfter?: Date;
	serial?: string;
	keyType?: TestKeyType;
	/** Intermediates between the leaf and `issuer`'s root, leaf-to-root; the leaf is signed by the first. */
	intermediates?: TestIssuer[];
	/** Reuse a key pair (for "same key, new cert" cases). */
	keys?: CryptoKeyPair;
}

export async function issueTestLeaf(issuer: TestIssuer, options: LeafOptions): Promise<TestLeaf> {
	const keys = options.keys ?? (await generateKeys(options.keyType ?? "ec-p256"));
	const signer = options.intermediates?.[0] ?? issuer;
	const now = Date.now();
	const serial = options.serial ?? nextSerial();
	const sans = options.names.map((n) =>
		/^[0-9.]+$/.test(n) || n.includes(":")
			? { type: "ip" as const, value: n }
			: { type: "dns" as const, value: n },
	);
	const cert = await x509.X509CertificateGenerator.create({
		serialNumber: serial,
		subject: `CN=${options.cn ?? options.names[0] ?? "no-name"}`,
		issuer: signer.cert.subject,
		notBefore: options.notBefore ?? new Date(now - 60_000),
		notAfter: options.notAfter ?? new Date(now + 30 * DAY),
		publicKey: keys.publicKey,
		signingKey: signer.keys.privateKey,
		signingAlgorithm: signingAlgorithm(signer.keys),
		extensions: [
			new x509.BasicConstraintsExtension(false, undefined, true),
			new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
			new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
			new x509.SubjectAlternativeNameExtension(sans),
		],
	});
	const certPem = pem(cert.toString("pem"));
	const chainPem = (options.intermediates ?? []).map((i) => i.certPem).join("");
	const keyPem = pem(await keyToPem(keys.privateKey));
	return { certPem, keyPem, chainPem, combinedPem: certPem + chainPem + keyPem, serial };
}

/** PEM text ending in exactly one newline, so blocks can be concatenated. */
function pem(text: string): string {
	return `${text.trimEnd()}\n`;
}
