/**
 * Parsing a certificate bundle: combined (HAProxy style, certificates and key in one file) or split
 * (cert, chain and key files). The result is normalised (leaf, intermediates leaf-to-root, key; LF; no
 * blank lines) and every structural rule is checked. Dates and names are checked by check.ts.
 */
import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import { CertificateeError, type ErrorCode } from "../errors.js";
import { commonName } from "./chain.js";
import {
	certificatePublicKey,
	keyTypeAndSize,
	type PublicKeyFacts,
	privateKeyPublic,
	samePublicKey,
} from "./keys.js";
import { normaliseName, normaliseSerial } from "./names.js";
import { encodePem, type PemBlock, splitPem } from "./pem.js";
import { type Bundle, type CertificateInfo, Secret } from "./types.js";

export const MAX_BUNDLE_BYTES = 1024 * 1024;

export type BundleInput =
	| { combined: string | Buffer }
	| { cert: string | Buffer; chain?: string | Buffer; key: string | Buffer };

export interface ParseOptions {
	/** Names the input in errors: a file path, "endpoint x ref y", "issuer le: example-com". */
	source: string;
}

const KEY_LABELS = new Set(["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY"]);
const IGNORED_LABELS = new Set(["EC PARAMETERS", "DH PARAMETERS"]);

function fail(code: ErrorCode, source: string, message: string, hint?: string): CertificateeError {
	return new CertificateeError(code, `${source}: ${message}`, {
		context: { file: source },
		...(hint ? { hint } : {}),
	});
}

function toText(data: string | Buffer, source: string): string {
	const size = typeof data === "string" ? Buffer.byteLength(data) : data.length;
	if (size > MAX_BUNDLE_BYTES) {
		throw fail(
			"BUNDLE_TOO_LARGE",
			source,
			`input is ${size} bytes; the limit is ${MAX_BUNDLE_BYTES} bytes`,
			"a certificate bundle is a few kilobytes: check that the right file is configured",
		);
	}
	const text = typeof data === "string" ? data : data.toString("utf8");
	if (text.trim() === "") throw fail("BUNDLE_EMPTY", source, "input is empty");
	return text;
}

function blocksOf(data: string | Buffer, source: string): PemBlock[] {
	const split = splitPem(toText(data, source));
	if (split.ok) return split.blocks;
	switch (split.problem) {
		case "binary":
			throw fail(
				"BUNDLE_NOT_PEM",
				source,
				"input is binary, not PEM",
				"convert DER with `openssl x509 -inform der`",
			);
		case "no-pem":
			throw fail("BUNDLE_NOT_PEM", source, "no PEM block found: expected BEGIN and END lines");
		case "truncated":
			throw fail(
				"BUNDLE_TRUNCATED",
				source,
				`the ${split.label} block has no matching END line (truncated?)`,
			);
		case "bad-base64":
			throw fail(
				"BUNDLE_TRUNCATED",
				source,
				`the ${split.label} block is not valid base64 (truncated or corrupt)`,
			);
	}
}

/** `spki`: the certificate's public key read from its DER (saves decoding it again), when the caller has it. */
export function describeCertificate(x: X509Certificate, spki?: PublicKeyFacts): CertificateInfo {
	const names = parseSubjectAltName(x.subjectAltName ?? "");
	return {
		fingerprint: x.fingerprint256.replace(/:/g, ""),
		sha1: x.fingerprint.replace(/:/g, ""),
		serial: normaliseSerial(x.serialNumber),
		notBefore: new Date(x.validFrom),
		notAfter: new Date(x.validTo),
		dnsNames: names.dns,
		ipAddresses: names.ip,
		subject: x.subject.replace(/\n/g, ", "),
		issuer: x.issuer.replace(/\n/g, ", "),
		subjectCn: commonName(x.subject),
		issuerCn: commonName(x.issuer),
		...(spki ? keyTypeAndSize(spki) : keyOf(x)),
		isCa: x.ca,
	};
}

function keyOf(x: X509Certificate): Pick<CertificateInfo, "keyType" | "keySize"> {
	const key = x.publicKey;
	const details = key.asymmetricKeyDetails ?? {};
	const keyType = key.asymmetricKeyType;
	return {
		keyType:
			keyType === "rsa" || keyType === "rsa-pss"
				? "rsa"
				: keyType === "ec" || keyType === "ed25519" || keyType === "ed448" || keyType === "dsa"
					? keyType
					: "other",
		keySize: details.modulusLength ?? curveBits(details.namedCurve),
	};
}

function curveBits(curve: string | undefined): number {
	switch (curve) {
		case "prime256v1":
		case "P-256":
			return 256;
		case "secp384r1":
		case "P-384":
			return 384;
		case "secp521r1":
		case "P-521":
			return 521;
		default:
			return 0;
	}
}

/** Node prints SANs as `DNS:a, DNS:b, IP Address:127.0.0.1`. */
export function parseSubjectAltName(san: string): { dns: string[]; ip: string[] } {
	const dns: string[] = [];
	const ip: string[] = [];
	for (const part of san.split(/,\s*/)) {
		const m = /^(DNS|IP Address):(.*)$/.exec(part.trim());
		if (!m) continue;
		const value = (m[2] as string).replace(/^"|"$/g, "");
		if (m[1] === "DNS") dns.push(normaliseName(value));
		else if (isIP(value) !== 0) ip.push(value.toLowerCase());
	}
	return { dns, ip };
}

interface ParsedCert {
	x509: X509Certificate;
	der: Buffer;
	/** Its public key read from the DER; undefined for kinds keys.ts does not read (OpenSSL compares those). */
	spki: PublicKeyFacts | undefined;
}

function parseCertificates(blocks: PemBlock[], source: string): ParsedCert[] {
	return blocks
		.filter((b) => b.label === "CERTIFICATE")
		.map((b, i) => {
			try {
				const x509 = new X509Certificate(b.der);
				return { x509, der: b.der, spki: certificatePublicKey(b.der) };
			} catch {
				throw fail("BUNDLE_BAD_CERTIFICATE", source, `certificate #${i + 1} cannot be parsed (corrupt DER)`);
			}
		});
}

interface KeyBlock {
	block: PemBlock;
	pem: string;
	/** Its public key, read from the DER (keys.ts); undefined when OpenSSL must decode it. */
	facts: PublicKeyFacts | undefined;
}

function findKey(blocks: PemBlock[], source: string): KeyBlock {
	if (
		blocks.some((b) => b.label === "ENCRYPTED PRIVATE KEY" || b.headers.some((h) => /ENCRYPTED/i.test(h)))
	) {
		throw fail(
			"BUNDLE_ENCRYPTED_KEY",
			source,
			"the private key is encrypted",
			"HAProxy cannot load encrypted keys without a passphrase: decrypt it with `openssl pkey`",
		);
	}
	const keys = blocks.filter((b) => KEY_LABELS.has(b.label));
	if (keys.length === 0) throw fail("BUNDLE_NO_KEY", source, "no private key found");
	if (keys.length > 1)
		throw fail("BUNDLE_SEVERAL_KEYS", source, `${keys.length} private keys found; expected one`);
	const block = keys[0] as PemBlock;
	return { block, pem: encodePem(block.label, block.der), facts: privateKeyPublic(block.label, block.der) };
}

/** OpenSSL's decoding of the key: for the shapes keys.ts does not read, and whenever it found no match. */
function decodeKey({ block, pem }: KeyBlock, source: string): KeyObject {
	try {
		return createPrivateKey({ key: pem, format: "pem" });
	} catch {
		throw fail(
			"BUNDLE_BAD_KEY",
			source,
			`the ${block.label} block cannot be parsed (corrupt or unsupported)`,
		);
	}
}

/** More certificates than any real bundle holds (a leaf, a few intermediates, maybe a root or a cross-sign). */
export const MAX_BUNDLE_CERTIFICATES = 32;

/**
 * Orders certificates leaf, then each issuer, leaf-to-root; fails if any does not link. The issuer of each
 * step is looked up by subject first (a signature check per candidate made an adversarially ordered chain
 * quadratic: 300 certificates took 3.8 s); only when no certificate carries that exact subject text are the
 * others tried, and there are at most MAX_BUNDLE_CERTIFICATES of them.
 */
function orderChain(leaf: ParsedCert, others: ParsedCert[], source: string): ParsedCert[] {
	if (others.length + 1 > MAX_BUNDLE_CERTIFICATES) {
		throw fail(
			"BUNDLE_TOO_LARGE",
			source,
			`${others.length + 1} certificates; the limit is ${MAX_BUNDLE_CERTIFICATES}`,
			"a bundle holds the leaf and its chain: remove the certificates that are not part of it",
		);
	}
	const bySubject = new Map<string, ParsedCert[]>();
	for (const c of others) bySubject.set(c.x509.subject, [...(bySubject.get(c.x509.subject) ?? []), c]);
	const ordered: ParsedCert[] = [];
	const rest = new Set(others);
	const signs = (issuer: ParsedCert, child: ParsedCert) =>
		rest.has(issuer) && child.x509.checkIssued(issuer.x509) && child.x509.verify(issuer.x509.publicKey);
	let current = leaf;
	while (rest.size > 0) {
		const child = current;
		const next =
			(bySubject.get(child.x509.issuer) ?? []).find((c) => signs(c, child)) ??
			[...rest].find((c) => signs(c, child));
		if (next === undefined) break;
		rest.delete(next);
		ordered.push(next);
		current = next;
	}
	if (rest.size > 0) {
		const leftover = [...rest][0] as ParsedCert;
		throw fail(
			"BUNDLE_CHAIN_BROKEN",
			source,
			`the chain does not link: "${leftover.x509.subject.replace(/\n/g, ", ")}" does not sign "${current.x509.subject.replace(/\n/g, ", ")}" nor any certificate above it`,
			"the chain must hold the leaf's issuer, then its issuer, and so on",
		);
	}
	return ordered;
}

export function parseBundle(input: BundleInput, options: ParseOptions): Bundle {
	const { source } = options;
	const blocks = bundleBlocks(input, source);
	const certs = parseCertificates(blocks, source);
	if (certs.length === 0) throw fail("BUNDLE_NO_CERTIFICATE", source, "no certificate found");
	const key = findKey(blocks, source);
	const leaf = leafOf(certs, key, source);
	const chain = orderChain(
		leaf,
		certs.filter((c) => c !== leaf),
		source,
	);
	const certPem = encodePem("CERTIFICATE", leaf.der);
	const chainPem = chain.map((c) => encodePem("CERTIFICATE", c.der)).join("");
	return {
		leaf: describeCertificate(leaf.x509, leaf.spki),
		chain: chain.map((c) => describeCertificate(c.x509, c.spki)),
		certPem,
		chainPem,
		fullchainPem: certPem + chainPem,
		key: new Secret(key.pem),
	};
}

/** The PEM blocks of the one combined file, or of the certificate, chain and key files in that order. */
function bundleBlocks(input: BundleInput, source: string): PemBlock[] {
	const blocks =
		"combined" in input
			? blocksOf(input.combined, source)
			: [
					...blocksOf(input.cert, `${source} (certificate)`),
					...(input.chain !== undefined && input.chain.length > 0
						? blocksOf(input.chain, `${source} (chain)`)
						: []),
					...blocksOf(input.key, `${source} (key)`),
				];
	const unknown = blocks.find(
		(b) =>
			b.label !== "CERTIFICATE" &&
			b.label !== "ENCRYPTED PRIVATE KEY" &&
			!KEY_LABELS.has(b.label) &&
			!IGNORED_LABELS.has(b.label),
	);
	if (unknown) throw fail("BUNDLE_NOT_PEM", source, `unexpected PEM block "${unknown.label}"`);
	return blocks;
}

/** The one end-entity certificate, the one the key belongs to. */
function leafOf(certs: ParsedCert[], key: KeyBlock, source: string): ParsedCert {
	// The match read from the DER; when there is none, OpenSSL decodes the key and gives the verdict as before.
	const { facts } = key;
	let leaf = facts ? certs.find((c) => c.spki !== undefined && samePublicKey(c.spki, facts)) : undefined;
	const decoded = leaf ? undefined : decodeKey(key, source);
	const leaves = certs.filter((c) => !c.x509.ca);
	if (leaves.length > 1) {
		throw fail(
			"BUNDLE_SEVERAL_LEAVES",
			source,
			`${leaves.length} end-entity certificates found (${leaves.map((l) => l.x509.subject.replace(/\n/g, ", ")).join("; ")}); expected one leaf and its chain`,
		);
	}
	if (decoded) leaf = certs.find((c) => c.x509.checkPrivateKey(decoded));
	if (!leaf) {
		const shown = (leaves[0] ?? certs[0]) as ParsedCert;
		throw fail(
			"BUNDLE_KEY_MISMATCH",
			source,
			`the private key does not match the certificate "${shown.x509.subject.replace(/\n/g, ", ")}" (serial ${normaliseSerial(shown.x509.serialNumber)})`,
			"pair the certificate with the key it was issued for",
		);
	}
	return leaf;
}

/** The HAProxy combined form: leaf, intermediates, key. Contains key material: write it, never log it. */
export function combinedPem(bundle: Bundle): string {
	return bundle.fullchainPem + bundle.key.reveal();
}

/** The names a bundle covers (DNS SANs and IP SANs). */
export function bundleNames(bundle: Bundle): string[] {
	return [...bundle.leaf.dnsNames, ...bundle.leaf.ipAddresses];
}
