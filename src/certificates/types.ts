import { inspect } from "node:util";

/** Facts about one X.509 certificate, computed by node:crypto. JSON-safe apart from the dates. */
export interface CertificateInfo {
	/** SHA-256 of the DER, uppercase hex without colons: the identity used everywhere. */
	fingerprint: string;
	/** SHA-1 of the DER, uppercase hex without colons (what HAProxy prints as "SHA1 FingerPrint"). */
	sha1: string;
	/** Uppercase hex, even length, as HAProxy and `openssl x509 -serial` print it. */
	serial: string;
	notBefore: Date;
	notAfter: Date;
	dnsNames: string[];
	ipAddresses: string[];
	subject: string;
	issuer: string;
	/** The subject's and issuer's CN (the part of a name every listing prints alike); "" when none. */
	subjectCn: string;
	issuerCn: string;
	keyType: "rsa" | "ec" | "ed25519" | "ed448" | "dsa" | "other";
	/** Modulus bits for RSA, curve bits for EC. */
	keySize: number;
	isCa: boolean;
}

/** Holds key material; prints as [redacted] through JSON, util.inspect and String(). */
export class Secret {
	readonly #value: string;
	constructor(value: string) {
		this.#value = value;
	}
	reveal(): string {
		return this.#value;
	}
	toJSON(): string {
		return "[redacted]";
	}
	toString(): string {
		return "[redacted]";
	}
	[inspect.custom](): string {
		return "[redacted]";
	}
}

/** A validated, normalised certificate with its chain and key. */
export interface Bundle {
	leaf: CertificateInfo;
	/** Intermediates, leaf-to-root order. */
	chain: CertificateInfo[];
	/** Normalised PEM of the leaf alone (LF endings, no blank lines, trailing newline). */
	certPem: string;
	/** Normalised PEM of the intermediates, leaf-to-root; "" when there are none. */
	chainPem: string;
	/** certPem + chainPem. */
	fullchainPem: string;
	/** Normalised PEM of the unencrypted private key. */
	key: Secret;
}
