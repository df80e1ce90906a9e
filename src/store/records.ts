/**
 * What certificatee keeps in the state store, as typed records over the narrow StateStore:
 *   certificates/<name>          issued certificates, newest first, the last 3 kept for rollback
 *   renewal/<name>               renewal state: jitter, renewAt, attempts, failures, orders (loop breaker)
 *   endpoints/<target>           per endpoint of an HAProxy target: backoff after failures, pinned duplicates,
 *                                reloads of the last hour and the reload breaker
 *   accounts/<issuer>            an ACME issuer's account: its key, the CA's account URL, the contact sent
 *   authorities/<issuer>         a local CA: its root certificate and key
 *   revocations/<issuer>         what a local CA revoked (it has no CRL; the operator acts on the list)
 *   sources/<source>/<0-f>       what a directory source last served (with keys), so every process keeps the
 *                                last valid certificate when its file turns invalid or older
 *   replacements/<certificate>   an operator's deliberate replacement (`certificatee replace`): this certificate
 *                                may replace one that expires later (no key material: its fingerprint)
 * Names that are not plain segments are escaped (nameSegment). Every record is validated when read; a record
 * that does not parse is STATE_CORRUPT, never guessed at.
 */
import { z } from "zod";
import { CertificateeError } from "../errors.js";
import type { StateStore } from "./types.js";

export const HISTORY_LIMIT = 3;

const isoDate = z.iso.datetime();

export const issuedCertificateSchema = z.object({
	certPem: z.string(),
	chainPem: z.string(),
	keyPem: z.string(),
	issuer: z.string(),
	domains: z.array(z.string()),
	keyType: z.string(),
	serial: z.string(),
	notBefore: isoDate,
	notAfter: isoDate,
	issuedAt: isoDate,
	/** The ACME profile it was issued under (draft-ietf-acme-profiles), when one was ordered. */
	profile: z.string().optional(),
});
export type IssuedCertificate = z.infer<typeof issuedCertificateSchema>;

export const certificateRecordSchema = z.object({ history: z.array(issuedCertificateSchema) });
export type CertificateRecord = z.infer<typeof certificateRecordSchema>;

export const renewalRecordSchema = z.object({
	/** In [0, 1): drawn once when a certificate is stored, then only read. */
	jitter: z.number().min(0).max(1),
	renewAt: isoDate.optional(),
	lastAttemptAt: isoDate.optional(),
	lastSuccessAt: isoDate.optional(),
	failures: z.number().int().min(0),
	lastFailureAt: isoDate.optional(),
	lastError: z
		.object({
			code: z.string(),
			message: z.string(),
			hint: z.string().optional(),
			/** false: retrying will not help (a permanent ACME problem); a human must act. */
			retryable: z.boolean().optional(),
		})
		.optional(),
	nextAttemptAt: isoDate.optional(),
	/** Start times of successful orders in the last 24 h, plus one in flight (loop breaker). */
	orders: z.array(isoDate),
	/** Set by `certificatee renew`: order at the next cycle, whatever backoff or the loop breaker say. */
	forceRequestedAt: isoDate.optional(),
	/** Position in the certificate's `issuers` list of the issuer the next order goes to (fallback). */
	issuerIndex: z.number().int().min(0).optional(),
	/** Consecutive failures on that issuer (the fallback moves on after `fallback_after`). */
	failuresOnIssuer: z.number().int().min(0).optional(),
	/** How many times an operator forced an order (`certificatee_forced_renewals_total`). */
	forcedRenewals: z.number().int().min(0).optional(),
});
export type RenewalRecord = z.infer<typeof renewalRecordSchema>;

export interface StoredRecord<T> {
	value: T;
	/** Pass back to the matching write as the expected version. 0 when the record does not exist. */
	version: number;
}

async function readRecord<T>(
	store: StateStore,
	key: string,
	schema: z.ZodType<T>,
): Promise<StoredRecord<T> | undefined> {
	const entry = await store.get(key);
	if (!entry) return undefined;
	const parsed = schema.safeParse(entry.value);
	if (!parsed.success) {
		const where = store.location?.(key) ?? `state record ${key}`;
		throw new CertificateeError("STATE_CORRUPT", `${where} does not have the expected shape`, {
			context: { operation: "read state", ...(store.location ? { file: where } : {}) },
			hint: `${z.prettifyError(parsed.error).split("\n")[0] ?? ""}; restore ${where} from a backup, or delete it to start over`,
		});
	}
	return { value: parsed.data, version: entry.version };
}

export const certificateKey = (name: string) => `certificates/${name}`;
export const renewalKey = (name: string) => `renewal/${name}`;

export function readCertificateRecord(store: StateStore, name: string) {
	return readRecord(store, certificateKey(name), certificateRecordSchema);
}

/** Puts `issued` first in the history, keeping the last HISTORY_LIMIT. Returns the new version. */
export function storeIssued(
	store: StateStore,
	name: string,
	issued: IssuedCertificate,
	previous: StoredRecord<CertificateRecord> | undefined,
): Promise<number> {
	const history = [issued, ...(previous?.value.history ?? [])].slice(0, HISTORY_LIMIT);
	return store.put(certificateKey(name), { history }, previous?.version ?? 0);
}

export function readRenewalRecord(store: StateStore, name: string) {
	return readRecord(store, renewalKey(name), renewalRecordSchema);
}

export function writeRenewalRecord(store: StateStore, name: string, state: RenewalRecord, version: number) {
	return store.put(renewalKey(name), renewalRecordSchema.parse(state), version);
}

/** One endpoint's memory across cycles, restarts and reloads. */
export const endpointMemorySchema = z.object({
	/** Failed cycles in a row. */
	failures: z.number().int().min(0),
	/** Sync cycles still to sit out. */
	skipLeft: z.number().int().min(0),
	/** Duplicates whose removal the endpoint refused (ref -> why): kept and synced, removal not retried. */
	pinned: z.record(z.string(), z.string()),
	/** Reloads certificatee did in the last hour (the budget is a sliding hour). */
	reloads: z
		.array(
			z.object({
				at: isoDate,
				reasons: z.array(z.enum(["new-certificate", "too-large"])),
				result: z.enum(["ok", "failed", "not-served"]),
			}),
		)
		.optional(),
	/** Open reload breaker: no writes until the node serves what was written, or an operator removes this. */
	breaker: z.object({ openedAt: isoDate, code: z.literal("RELOAD_FAILED"), message: z.string() }).optional(),
});
export type EndpointMemory = z.infer<typeof endpointMemorySchema>;
export const targetMemorySchema = z.object({ endpoints: z.record(z.string(), endpointMemorySchema) });
export type TargetMemory = z.infer<typeof targetMemorySchema>;

/**
 * A configured name (target, issuer) as one key segment: as it is when made of letters, digits and "-"
 * (starting with a letter or digit); otherwise "x_" then the name with every byte but letters, digits and "-"
 * as _hh. Two names never share a record (a plain name has no "_"), and no name escapes its folder.
 */
export function nameSegment(name: string): string {
	if (/^[A-Za-z0-9][A-Za-z0-9-]*$/.test(name)) return name;
	const escaped = [...new TextEncoder().encode(name)]
		.map((b) => {
			const c = String.fromCharCode(b);
			return /[A-Za-z0-9-]/.test(c) ? c : `_${b.toString(16).padStart(2, "0")}`;
		})
		.join("");
	return `x_${escaped}`;
}

export function endpointsKey(target: string): string {
	return `endpoints/${nameSegment(target)}`;
}

export function readTargetMemory(store: StateStore, target: string) {
	return readRecord(store, endpointsKey(target), targetMemorySchema);
}

export function writeTargetMemory(store: StateStore, target: string, memory: TargetMemory, version: number) {
	return store.put(endpointsKey(target), targetMemorySchema.parse(memory), version);
}

/** An ACME account. Key material (PEM) is only ever revealed to sign; the store keeps it in 0600 files. */
export const accountRecordSchema = z.object({
	keyPem: z.string(),
	/** The directory the account is registered at; absent until registration succeeded. */
	directoryUrl: z.string().optional(),
	accountUrl: z.string().optional(),
	/** The contact URIs last sent to the CA (mailto:...). */
	contact: z.array(z.string()).optional(),
	/** During a key rollover: the new key, stored before the CA switches. */
	nextKeyPem: z.string().optional(),
});
export type AccountRecord = z.infer<typeof accountRecordSchema>;
export const accountKey = (issuer: string) => `accounts/${nameSegment(issuer)}`;

export function readAccountRecord(store: StateStore, issuer: string) {
	return readRecord(store, accountKey(issuer), accountRecordSchema);
}

export function writeAccountRecord(
	store: StateStore,
	issuer: string,
	account: AccountRecord,
	version: number,
) {
	return store.put(accountKey(issuer), accountRecordSchema.parse(account), version);
}

/** A local CA: its self-signed root and the root's PKCS#8 key. */
export const authorityRecordSchema = z.object({ certPem: z.string(), keyPem: z.string() });
export type AuthorityRecord = z.infer<typeof authorityRecordSchema>;
export const authorityKey = (issuer: string) => `authorities/${nameSegment(issuer)}`;

export function readAuthorityRecord(store: StateStore, issuer: string) {
	return readRecord(store, authorityKey(issuer), authorityRecordSchema);
}

export function writeAuthorityRecord(
	store: StateStore,
	issuer: string,
	authority: AuthorityRecord,
	version: number,
) {
	return store.put(authorityKey(issuer), authorityRecordSchema.parse(authority), version);
}

export const revocationSchema = z.object({
	serial: z.string(),
	subject: z.string(),
	reason: z.string(),
	revokedAt: isoDate,
});
export const revocationsRecordSchema = z.object({ revoked: z.array(revocationSchema) });
export type RevocationsRecord = z.infer<typeof revocationsRecordSchema>;
export const revocationsKey = (issuer: string) => `revocations/${nameSegment(issuer)}`;

export function readRevocations(store: StateStore, issuer: string) {
	return readRecord(store, revocationsKey(issuer), revocationsRecordSchema);
}

export function writeRevocations(
	store: StateStore,
	issuer: string,
	record: RevocationsRecord,
	version: number,
) {
	return store.put(revocationsKey(issuer), revocationsRecordSchema.parse(record), version);
}

/**
 * What a directory source last served, per certificate name (in 16 records `sources/<source>/<0-f>` by a hash of
 * the name): kept like issued certificates (0600 files in state_dir, with the key), so the daemon, `plan`,
 * `status` and a restart decide from the same memory and keep serving the last valid certificate when its file
 * turns invalid or older.
 */
export const servedEntrySchema = z.object({
	certPem: z.string(),
	chainPem: z.string(),
	keyPem: z.string(),
	/** DNS and IP names, normalised and sorted. */
	names: z.array(z.string()),
	/** The file(s) it was read from, for reports. */
	file: z.string(),
	serial: z.string(),
	fingerprint: z.string(),
	notAfter: isoDate,
	/** When this certificate was first served under its name. */
	since: isoDate,
});
export type ServedEntry = z.infer<typeof servedEntrySchema>;
export const sourceMemorySchema = z.object({ served: z.record(z.string(), servedEntrySchema) });
export type SourceMemoryRecord = z.infer<typeof sourceMemorySchema>;
/** The folder of a source's records (`sources/<source>`); each record is one bucket under it. */
export const sourceMemoryKey = (source: string) => `sources/${nameSegment(source)}`;

export function readSourceMemory(store: StateStore, key: string) {
	return readRecord(store, key, sourceMemorySchema);
}

export function writeSourceMemory(
	store: StateStore,
	key: string,
	record: SourceMemoryRecord,
	version: number,
) {
	return store.put(key, sourceMemorySchema.parse(record), version);
}

/**
 * A deliberate replacement (`certificatee replace NAME --reason …`): the certificate with this fingerprint may be
 * served and pushed under NAME although the one it replaces expires later (a key compromise, a CA change). It
 * lifts the never-downgrade protection (SOURCE_OLDER, UPDATE_WOULD_DOWNGRADE) for that one certificate only.
 */
export const replacementSchema = z.object({
	certificate: z.string(),
	fingerprint: z.string(),
	serial: z.string(),
	notAfter: isoDate,
	/** The certificate it replaces, as served when it was recorded (absent when none was). */
	replaces: z.object({ serial: z.string(), notAfter: isoDate }).optional(),
	reason: z.string(),
	/** Who asked: user@host (pid). */
	by: z.string(),
	requestedAt: isoDate,
	/** The file the replacement was read from. */
	file: z.string().optional(),
});
export type Replacement = z.infer<typeof replacementSchema>;
export const replacementKey = (certificate: string) => `replacements/${nameSegment(certificate)}`;

export function readReplacement(store: StateStore, certificate: string) {
	return readRecord(store, replacementKey(certificate), replacementSchema);
}

/** Every replacement recorded, by certificate name. */
export async function readReplacements(store: StateStore): Promise<Map<string, Replacement>> {
	const out = new Map<string, Replacement>();
	for (const key of await store.list("replacements/")) {
		const record = await readRecord(store, key, replacementSchema);
		if (record) out.set(record.value.certificate, record.value);
	}
	return out;
}

/** Records (or supersedes) the replacement of its certificate. */
export async function writeReplacement(store: StateStore, replacement: Replacement): Promise<number> {
	const key = replacementKey(replacement.certificate);
	const current = await store.get(key);
	return store.put(key, replacementSchema.parse(replacement), current?.version ?? 0);
}
