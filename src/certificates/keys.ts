/**
 * Does a private key belong to a certificate, without OpenSSL's key decoder. OpenSSL 3's decoder costs about a
 * millisecond per key (createPrivateKey), which made loading a directory of 5,000 files take seconds; reading the
 * few fields needed from the DER takes microseconds.
 *
 * The verdict is the same as `X509Certificate.checkPrivateKey(createPrivateKey(pem))`, which compares the
 * certificate's public key with the key's: RSA by modulus and exponent; EC by the public point, computed here
 * from the private scalar (one scalar multiplication through node:crypto's ECDH) and, when the key also carries
 * its public point, required to equal it. Only the common shapes are read (PKCS#8, SEC1 and PKCS#1 for RSA and
 * NIST P-256/384/521); for anything else, and whenever the answer is not a match, this returns undefined and the
 * caller asks OpenSSL, so a refusal or an error message never comes from here.
 */
import { createECDH, type ECDH } from "node:crypto";
import {
	bitStringBytes,
	oid,
	readAll,
	readOne,
	smallInteger,
	TAG,
	type Tlv,
	unsignedInteger,
} from "./der.js";

/** A public key reduced to what identifies it. */
export type PublicKeyFacts =
	| { kind: "rsa"; n: Buffer; e: Buffer }
	| { kind: "ec"; curve: string; point: Buffer };

const RSA = "1.2.840.113549.1.1.1";
const EC = "1.2.840.10045.2.1";
/** Curve OID → node:crypto's name and the size of a private scalar in bytes. */
const CURVES: Record<string, { name: string; bytes: number; bits: number }> = {
	"1.2.840.10045.3.1.7": { name: "prime256v1", bytes: 32, bits: 256 },
	"1.3.132.0.34": { name: "secp384r1", bytes: 48, bits: 384 },
	"1.3.132.0.35": { name: "secp521r1", bytes: 66, bits: 521 },
};

/** The certificate's SubjectPublicKeyInfo (RSA or a NIST curve), read from its DER. */
export function certificatePublicKey(certDer: Buffer): PublicKeyFacts | undefined {
	const [tbs] = readOne(certDer, TAG.sequence) ?? [];
	if (tbs?.tag !== TAG.sequence) return undefined;
	const fields = readAll(tbs.body);
	if (!fields) return undefined;
	// [0] version, serial, signature, issuer, validity, subject, subjectPublicKeyInfo
	const spki = fields[fields[0]?.tag === TAG.context0 ? 6 : 5];
	const info = spki?.tag === TAG.sequence ? readAll(spki.body) : undefined;
	return info ? publicKeyInfo(info) : undefined;
}

/** A SubjectPublicKeyInfo's DER (what `KeyObject.export({ type: "spki", format: "der" })` gives). */
export function spkiPublicKey(der: Buffer): PublicKeyFacts | undefined {
	const fields = readOne(der, TAG.sequence);
	return fields ? publicKeyInfo(fields) : undefined;
}

/** The fields of a SubjectPublicKeyInfo. */
function publicKeyInfo([algorithm, key, ...rest]: Tlv[]): PublicKeyFacts | undefined {
	if (algorithm?.tag !== TAG.sequence || rest.length > 0) return undefined;
	const alg = readAll(algorithm.body);
	const bits = bitStringBytes(key);
	if (!alg || !bits) return undefined;
	const kind = oid(alg[0]);
	if (kind === RSA && alg.length === 2 && alg[1]?.tag === TAG.null && alg[1].body.length === 0) {
		const [n, e, ...more] = readOne(bits, TAG.sequence) ?? [];
		return more.length === 0 ? rsaFacts(n, e) : undefined;
	}
	const curve = oid(alg[1]);
	if (kind === EC && alg.length === 2 && curve && CURVES[curve] && bits[0] === 0x04) {
		return { kind: "ec", curve, point: bits };
	}
	return undefined;
}

function rsaFacts(nTlv: Tlv | undefined, eTlv: Tlv | undefined): PublicKeyFacts | undefined {
	const n = unsignedInteger(nTlv);
	const e = unsignedInteger(eTlv);
	return n && e ? { kind: "rsa", n, e } : undefined;
}

/** The key type and size `describeCertificate` reports, from the same facts. */
export function keyTypeAndSize(facts: PublicKeyFacts): { keyType: "rsa" | "ec"; keySize: number } {
	if (facts.kind === "ec") return { keyType: "ec", keySize: CURVES[facts.curve]?.bits ?? 0 };
	const top = facts.n[0] as number;
	return { keyType: "rsa", keySize: (facts.n.length - 1) * 8 + (32 - Math.clz32(top)) };
}

/**
 * The public key of a private key block ("PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"), or undefined when
 * it is not one of the shapes read here.
 */
export function privateKeyPublic(label: string, der: Buffer): PublicKeyFacts | undefined {
	try {
		if (label === "RSA PRIVATE KEY") return rsaPrivate(der);
		if (label === "EC PRIVATE KEY") return ecPrivate(der, undefined);
		if (label === "PRIVATE KEY") return pkcs8(der);
	} catch {
		// ECDH refuses a scalar outside the curve's range: OpenSSL decides.
	}
	return undefined;
}

/** PrivateKeyInfo (RFC 5208) / OneAsymmetricKey v1 without attributes or a public key. */
function pkcs8(der: Buffer): PublicKeyFacts | undefined {
	const [version, algorithm, key, ...rest] = readOne(der, TAG.sequence) ?? [];
	if (smallInteger(version) !== 0 || rest.length > 0) return undefined;
	if (algorithm?.tag !== TAG.sequence || key?.tag !== TAG.octetString) return undefined;
	const alg = readAll(algorithm.body);
	if (alg?.length !== 2) return undefined;
	const kind = oid(alg[0]);
	if (kind === RSA && alg[1]?.tag === TAG.null && alg[1].body.length === 0) return rsaPrivate(key.body);
	const curve = oid(alg[1]);
	if (kind === EC && curve && CURVES[curve]) return ecPrivate(key.body, curve);
	return undefined;
}

/** RSAPrivateKey (RFC 8017), two primes. */
function rsaPrivate(der: Buffer): PublicKeyFacts | undefined {
	const fields = readOne(der, TAG.sequence);
	if (fields?.length !== 9 || smallInteger(fields[0]) !== 0) return undefined;
	if (fields.slice(3).some((f) => unsignedInteger(f) === undefined)) return undefined;
	return rsaFacts(fields[1], fields[2]);
}

/** ECPrivateKey (RFC 5915); `curve` from PKCS#8's algorithm, which the key's own parameters must agree with. */
function ecPrivate(der: Buffer, outer: string | undefined): PublicKeyFacts | undefined {
	const [version, scalar, ...optional] = readOne(der, TAG.sequence) ?? [];
	if (smallInteger(version) !== 1 || scalar?.tag !== TAG.octetString) return undefined;
	let curve = outer;
	let embedded: Buffer | undefined;
	let next = 0;
	if (optional[next]?.tag === TAG.context0) {
		const [param, ...more] = readAll((optional[next] as Tlv).body) ?? [];
		const inner = oid(param);
		if (!inner || more.length > 0 || (curve !== undefined && curve !== inner)) return undefined;
		curve = inner;
		next += 1;
	}
	if (optional[next]?.tag === TAG.context1) {
		const [bits, ...more] = readAll((optional[next] as Tlv).body) ?? [];
		embedded = bitStringBytes(bits);
		if (!embedded || more.length > 0) return undefined;
		next += 1;
	}
	if (next !== optional.length || curve === undefined) return undefined;
	const spec = CURVES[curve];
	if (!spec || scalar.body.length !== spec.bytes) return undefined;
	const ecdh = ecdhFor(spec.name);
	ecdh.setPrivateKey(scalar.body);
	const point = ecdh.getPublicKey();
	// A key whose stored public point is not its own: OpenSSL compares the stored one; let it decide.
	if (embedded && !embedded.equals(point)) return undefined;
	return { kind: "ec", curve, point };
}

/** One ECDH object per curve, reused: making the curve's group is half the cost of a small scalar multiplication. */
const ecdhs = new Map<string, ECDH>();
function ecdhFor(curve: string): ECDH {
	let ecdh = ecdhs.get(curve);
	if (!ecdh) {
		ecdh = createECDH(curve);
		ecdhs.set(curve, ecdh);
	}
	return ecdh;
}

export function samePublicKey(a: PublicKeyFacts, b: PublicKeyFacts): boolean {
	if (a.kind === "rsa" && b.kind === "rsa") return a.n.equals(b.n) && a.e.equals(b.e);
	if (a.kind === "ec" && b.kind === "ec") return a.curve === b.curve && a.point.equals(b.point);
	return false;
}
