/**
 * etcd is not a secret store: every value the cluster keeps there (certificates with their private keys, the ACME
 * account key, the local CA's key) is sealed with AES-256-GCM under a key every member reads from
 * `cluster.encryption_key_file` (or CERTIFICATEE_ENCRYPTION_KEY). The associated data binds the cluster's prefix,
 * the record's state key and the record version it was written as (format 2): a sealed value copied onto another
 * key or into another cluster does not open, and one written again later (a rollback, a replay of an older value)
 * opens with a version older than etcd's, which the store refuses (etcd-store.ts). Format 1 (the state key
 * only) is still read, so a cluster upgrades in place; every write seals format 2.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { secretFileExposure } from "../base/secret-file.js";
import { CertificateeError, exposedSecret, rememberSecret } from "../errors.js";

export const ENCRYPTION_KEY_ENV = "CERTIFICATEE_ENCRYPTION_KEY";
export const ENCRYPTION_KEY_FIELD = "cluster.encryption_key_file";
const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const MAKE_KEY =
	"head -c 32 /dev/urandom | base64 > /etc/certificatee/cluster.key; chmod 600 /etc/certificatee/cluster.key";

/** What etcd holds for one record: `data` is the ciphertext followed by the 16-byte GCM tag. */
export interface SealedValue {
	v: 2;
	alg: "A256GCM";
	/** The record version this value was written as (etcd's version of the key right after the write). */
	seq: number;
	nonce: string;
	data: string;
}

/** Format 1, before issue 25 (finding 10): the associated data is the state key alone. Read, never written. */
export interface LegacySealedValue {
	v: 1;
	alg: "A256GCM";
	nonce: string;
	data: string;
}

/** Where a sealed value belongs: the cluster's prefix and the record's state key. */
export interface RecordName {
	prefix: string;
	key: string;
}

/** An opened value: its plaintext and the version it was sealed as (absent for format 1). */
export interface Opened {
	plain: Buffer;
	seq?: number;
}

/** 32 bytes from their base64 or hex spelling (surrounding whitespace ignored); undefined otherwise. */
export function parseEncryptionKey(text: string): Buffer | undefined {
	const t = text.trim();
	if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, "hex");
	if (/^[A-Za-z0-9+/_-]{43}=?$/.test(t)) {
		const key = Buffer.from(t, t.includes("-") || t.includes("_") ? "base64url" : "base64");
		if (key.length === KEY_BYTES) return key;
	}
	return undefined;
}

/**
 * The cluster's encryption key from `path` (the `cluster.encryption_key_file` setting), else from the environment.
 * Never puts the file's content in an error.
 */
export function loadEncryptionKey(path: string | undefined, env: NodeJS.ProcessEnv = process.env): Buffer {
	const hint = `every member needs the same 32 random bytes, base64 or hex: ${MAKE_KEY}`;
	if (path === undefined) {
		const fromEnv = env[ENCRYPTION_KEY_ENV];
		if (fromEnv === undefined || fromEnv === "") {
			throw new CertificateeError(
				"CONFIG_INVALID",
				`${ENCRYPTION_KEY_FIELD} is required with cluster: (or set ${ENCRYPTION_KEY_ENV}): values in etcd are encrypted`,
				{ context: { field: ENCRYPTION_KEY_FIELD }, hint },
			);
		}
		const key = parseEncryptionKey(fromEnv);
		if (key) return remembered(key, fromEnv);
		throw new CertificateeError(
			"CONFIG_INVALID",
			`${ENCRYPTION_KEY_ENV} is not a 32-byte key in base64 or hex (${ENCRYPTION_KEY_FIELD} is not set)`,
			{ context: { field: ENCRYPTION_KEY_FIELD }, hint },
		);
	}
	let text: string;
	try {
		text = readFileSync(path, "utf8");
	} catch (e) {
		const reason = (e as NodeJS.ErrnoException).code ?? "unreadable";
		throw new CertificateeError(
			"CONFIG_SECRET_UNREADABLE",
			`cannot read ${ENCRYPTION_KEY_FIELD} ${path} (${reason})`,
			{
				context: { file: path, field: ENCRYPTION_KEY_FIELD },
				hint: `create it (${MAKE_KEY}), or fix its permissions so certificatee may read it`,
			},
		);
	}
	const exposed = secretFileExposure(path, ENCRYPTION_KEY_FIELD);
	if (exposed !== undefined) throw exposedSecret(path, ENCRYPTION_KEY_FIELD, exposed);
	const key = parseEncryptionKey(text);
	if (key) return remembered(key, text);
	throw new CertificateeError(
		"CONFIG_INVALID",
		`${ENCRYPTION_KEY_FIELD} ${path} does not hold a 32-byte key in base64 or hex`,
		{ context: { file: path, field: ENCRYPTION_KEY_FIELD }, hint },
	);
}

/** The key, its text and its encodings are scrubbed from every message from now on. */
function remembered(key: Buffer, text: string): Buffer {
	rememberSecret(key);
	rememberSecret(text.trim());
	return key;
}

function checkKey(key: Buffer): void {
	if (key.length !== KEY_BYTES)
		throw new CertificateeError(
			"INTERNAL",
			`the cluster encryption key has ${key.length} bytes, not ${KEY_BYTES}`,
		);
}

function associatedData(record: RecordName, seq: number): Buffer {
	return Buffer.from(JSON.stringify(["certificatee state", 2, record.prefix, record.key, seq]), "utf8");
}

/** `plaintext` sealed for `record` at version `seq` (the associated data), with a fresh random nonce. */
export function seal(key: Buffer, record: RecordName, seq: number, plaintext: Buffer): SealedValue {
	checkKey(key);
	const nonce = randomBytes(NONCE_BYTES);
	const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
	cipher.setAAD(associatedData(record, seq));
	const data = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
	return { v: 2, alg: "A256GCM", seq, nonce: nonce.toString("base64"), data: data.toString("base64") };
}

/**
 * The plaintext of a sealed value (format 2, or format 1 from before the upgrade) and the version it was sealed
 * as, or undefined when it does not open: another key, another record or cluster, another version, or changed
 * bytes (GCM says no more than that, and neither does this).
 */
export function open(key: Buffer, record: RecordName, sealed: unknown): Opened | undefined {
	checkKey(key);
	if (!isSealed(sealed)) return undefined;
	const aad = sealed.v === 2 ? associatedData(record, sealed.seq) : Buffer.from(record.key, "utf8");
	const plain = decrypt(key, aad, sealed.nonce, sealed.data);
	if (plain === undefined) return undefined;
	return sealed.v === 2 ? { plain, seq: sealed.seq } : { plain };
}

function decrypt(key: Buffer, aad: Buffer, nonceText: string, dataText: string): Buffer | undefined {
	const nonce = Buffer.from(nonceText, "base64");
	const data = Buffer.from(dataText, "base64");
	if (nonce.length !== NONCE_BYTES || data.length < TAG_BYTES) return undefined;
	try {
		const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
		decipher.setAAD(aad);
		decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
		return Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]);
	} catch {
		return undefined;
	}
}

export function isSealed(value: unknown): value is SealedValue | LegacySealedValue {
	const v = value as { v?: unknown; alg?: unknown; seq?: unknown; nonce?: unknown; data?: unknown } | null;
	if (typeof v !== "object" || v === null || v.alg !== "A256GCM") return false;
	if (typeof v.nonce !== "string" || typeof v.data !== "string") return false;
	if (v.v === 1) return true;
	return v.v === 2 && typeof v.seq === "number" && Number.isSafeInteger(v.seq) && v.seq >= 1;
}
