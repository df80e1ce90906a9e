import { createPrivateKey, createPublicKey, generateKeyPairSync, X509Certificate } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../src/certificates/index.js";
import {
	certificatePublicKey,
	type PublicKeyFacts,
	privateKeyPublic,
	samePublicKey,
	spkiPublicKey,
} from "../../src/certificates/keys.js";
import { encodePem, splitPem } from "../../src/certificates/pem.js";
import type { CertificateeError } from "../../src/errors.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";

const derOf = (pem: string) => {
	const split = splitPem(pem);
	if (!split.ok) throw new Error("not PEM");
	return split.blocks[0]?.der as Buffer;
};

/** What OpenSSL says the public key of a private key is. */
const opensslPublic = (label: string, der: Buffer) =>
	spkiPublicKey(
		createPublicKey(createPrivateKey({ key: encodePem(label, der), format: "pem" })).export({
			type: "spki",
			format: "der",
		}),
	);

/** Every encoding HAProxy accepts for one key: PKCS#8, and SEC1 (EC) or PKCS#1 (RSA). */
function encodings(pkcs8: Buffer): Array<[string, Buffer]> {
	const key = createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" });
	const legacy = key.asymmetricKeyType === "ec" ? "sec1" : "pkcs1";
	return [
		["PRIVATE KEY", pkcs8],
		[legacy === "sec1" ? "EC PRIVATE KEY" : "RSA PRIVATE KEY", key.export({ type: legacy, format: "der" })],
	];
}

let root: TestIssuer;
const leaves: Record<string, TestLeaf> = {};
beforeAll(async () => {
	root = await createTestCa("keys root");
	for (const keyType of ["ec-p256", "ec-p384", "rsa-2048"] as const) {
		leaves[keyType] = await issueTestLeaf(root, { names: [`${keyType}.test`], keyType });
	}
});

describe("certificates/keys: the public key of a private key, read from the DER", () => {
	it.each(["ec-p256", "ec-p384", "rsa-2048"])(
		"%s: every encoding gives the certificate's key, as OpenSSL does",
		(t) => {
			const leaf = leaves[t] as TestLeaf;
			const cert = certificatePublicKey(derOf(leaf.certPem)) as PublicKeyFacts;
			expect(cert).toBeDefined();
			for (const [label, der] of encodings(derOf(leaf.keyPem))) {
				const facts = privateKeyPublic(label, der) as PublicKeyFacts;
				expect(facts, label).toBeDefined();
				expect(samePublicKey(facts, cert), label).toBe(true);
				expect(samePublicKey(facts, opensslPublic(label, der) as PublicKeyFacts), label).toBe(true);
			}
		},
	);

	it("reads P-521 keys (PKCS#8 and SEC1) like OpenSSL", () => {
		const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-521" });
		for (const [label, der] of encodings(privateKey.export({ type: "pkcs8", format: "der" }))) {
			const facts = privateKeyPublic(label, der) as PublicKeyFacts;
			expect(facts.kind === "ec" && facts.curve).toBe("1.3.132.0.35");
			expect(samePublicKey(facts, opensslPublic(label, der) as PublicKeyFacts)).toBe(true);
		}
	});

	it("tells different keys apart (other key, other kind)", () => {
		const ec = certificatePublicKey(derOf((leaves["ec-p256"] as TestLeaf).certPem)) as PublicKeyFacts;
		const ec384 = certificatePublicKey(derOf((leaves["ec-p384"] as TestLeaf).certPem)) as PublicKeyFacts;
		const rsa = certificatePublicKey(derOf((leaves["rsa-2048"] as TestLeaf).certPem)) as PublicKeyFacts;
		const otherEc = privateKeyPublic(
			"PRIVATE KEY",
			generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "der" }),
		) as PublicKeyFacts;
		expect(samePublicKey(ec, otherEc)).toBe(false);
		expect(samePublicKey(ec, ec384)).toBe(false);
		expect(samePublicKey(ec, rsa)).toBe(false);
	});

	it("leaves other shapes to OpenSSL: Ed25519, RSA-PSS, non-minimal DER, trailing bytes, a scalar out of range", () => {
		const pkcs8 = (k: ReturnType<typeof generateKeyPairSync>["privateKey"]) =>
			k.export({ type: "pkcs8", format: "der" });
		expect(privateKeyPublic("PRIVATE KEY", pkcs8(generateKeyPairSync("ed25519").privateKey))).toBeUndefined();
		expect(
			privateKeyPublic(
				"PRIVATE KEY",
				pkcs8(generateKeyPairSync("rsa-pss", { modulusLength: 2048 }).privateKey),
			),
		).toBeUndefined();
		const good = derOf((leaves["ec-p256"] as TestLeaf).keyPem);
		expect(privateKeyPublic("PRIVATE KEY", Buffer.concat([good, Buffer.from([0])]))).toBeUndefined();
		// The outer length in two bytes with a leading zero although one is enough: BER, not DER.
		expect(good[1]).toBe(0x81);
		const longForm = Buffer.concat([Buffer.from([0x30, 0x82, 0x00, good[2] as number]), good.subarray(3)]);
		expect(privateKeyPublic("PRIVATE KEY", longForm)).toBeUndefined();
		expect(createPrivateKey({ key: longForm, format: "der", type: "pkcs8" }).asymmetricKeyType).toBe("ec");
		// The P-256 order n as the scalar: ECDH refuses it.
		const n = Buffer.from("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551", "hex");
		const sec1 = Buffer.concat([
			Buffer.from("3031020101", "hex"),
			Buffer.from([0x04, 0x20]),
			n,
			Buffer.from("a00a06082a8648ce3d030107", "hex"),
		]);
		expect(privateKeyPublic("EC PRIVATE KEY", sec1)).toBeUndefined();
	});

	it("a key whose stored public point is not its own is judged by OpenSSL, as before", () => {
		const leaf = leaves["ec-p256"] as TestLeaf;
		const other = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
		const otherPoint = createPublicKey(other).export({ type: "spki", format: "der" }).subarray(-65);
		// The leaf's key with the other key's public point in its [1] field (PKCS#8 from WebCrypto carries it).
		const der = Buffer.from(derOf(leaf.keyPem));
		const ownPoint = createPublicKey(createPrivateKey({ key: leaf.keyPem })).export({
			type: "spki",
			format: "der",
		});
		const at = der.indexOf(ownPoint.subarray(-65));
		expect(at).toBeGreaterThan(0);
		otherPoint.copy(der, at);
		expect(privateKeyPublic("PRIVATE KEY", der)).toBeUndefined();
		// OpenSSL compares the stored point: the bundle's verdict is its verdict.
		const cert = new X509Certificate(leaf.certPem);
		const openssl = cert.checkPrivateKey(
			createPrivateKey({ key: encodePem("PRIVATE KEY", der), format: "pem" }),
		);
		const combined = leaf.certPem + encodePem("PRIVATE KEY", der);
		let code: string | undefined;
		try {
			parseBundle({ combined }, { source: "x.pem" });
		} catch (e) {
			code = (e as CertificateeError).code;
		}
		expect(code).toBe(openssl ? undefined : "BUNDLE_KEY_MISMATCH");
	});

	it("a bundle reports the same key type and size as OpenSSL's description", () => {
		for (const t of ["ec-p256", "ec-p384", "rsa-2048"]) {
			const leaf = leaves[t] as TestLeaf;
			const b = parseBundle({ combined: leaf.combinedPem }, { source: `${t}.pem` });
			const key = new X509Certificate(leaf.certPem).publicKey;
			const d = key.asymmetricKeyDetails ?? {};
			expect(b.leaf.keyType).toBe(key.asymmetricKeyType);
			expect(b.leaf.keySize).toBe(d.modulusLength ?? { prime256v1: 256, secp384r1: 384 }[d.namedCurve ?? ""]);
		}
	});

	it("a combined file with a key that is not the certificate's is a mismatch", () => {
		const a = leaves["ec-p256"] as TestLeaf;
		const b = leaves["ec-p384"] as TestLeaf;
		expect(() => parseBundle({ combined: a.certPem + b.keyPem }, { source: "x.pem" })).toThrow(
			expect.objectContaining({ code: "BUNDLE_KEY_MISMATCH" }) as CertificateeError,
		);
	});
});
