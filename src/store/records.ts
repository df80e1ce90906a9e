/**
 * What certificatee keeps in the state store, as typed records over the narrow StateStore:
 *   certificates/<name>          issued certificates, newest first, the last 3 kept for rollback
 *   renewal/<name>               renewal state: jitter, renewAt, attempts, failures, orders (loop breaker)
 *   endpoints/<target>           per endpoint of an HAProxy target: backoff after failures, pinned duplicates
 * (The ACME account is the acme issuer's own, behind its AccountStore: <state_dir>/acme/<issuer>/.)
 * Every record is validated when read; a record that does not parse is STATE_CORRUPT, never guessed at.
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
});
export type IssuedCertificate = z.infer<typeof issuedCertificateSchema>;

export const certificateRecordSchema = z.object({ history: z.array(issuedCertificateSchema) });
export type CertificateRecord = z.infer<typeof certificateRecordSchema>;

export const renewalStateSchema = z.object({
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
export type RenewalState = z.infer<typeof renewalStateSchema>;

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

export function readRenewalState(store: StateStore, name: string) {
	return readRecord(store, renewalKey(name), renewalStateSchema);
}

export function writeRenewalState(store: StateStore, name: string, state: RenewalState, version: number) {
	return store.put(renewalKey(name), renewalStateSchema.parse(state), version);
}

/** One endpoint's memory across cycles, restarts and reloads. */
export const endpointMemorySchema = z.object({
	/** Failed cycles in a row. */
	failures: z.number().int().min(0),
	/** Sync cycles still to sit out. */
	skipLeft: z.number().int().min(0),
	/** Duplicates whose removal the endpoint refused (ref -> why): kept and synced, removal not retried. */
	pinned: z.record(z.string(), z.string()),
});
export type EndpointMemory = z.infer<typeof endpointMemorySchema>;
export const targetMemorySchema = z.object({ endpoints: z.record(z.string(), endpointMemorySchema) });
export type TargetMemory = z.infer<typeof targetMemorySchema>;

/**
 * A target's name as one key segment: as it is when made of letters, digits and "-" (starting with a letter
 * or digit); otherwise "x_" then the name with every byte but letters, digits and "-" as _hh. Two names never
 * share a record (a plain name has no "_"), and no name escapes endpoints/.
 */
export function endpointsKey(target: string): string {
	if (/^[A-Za-z0-9][A-Za-z0-9-]*$/.test(target)) return `endpoints/${target}`;
	const escaped = [...new TextEncoder().encode(target)]
		.map((b) => {
			const c = String.fromCharCode(b);
			return /[A-Za-z0-9-]/.test(c) ? c : `_${b.toString(16).padStart(2, "0")}`;
		})
		.join("");
	return `endpoints/x_${escaped}`;
}

export function readTargetMemory(store: StateStore, target: string) {
	return readRecord(store, endpointsKey(target), targetMemorySchema);
}

export function writeTargetMemory(store: StateStore, target: string, memory: TargetMemory, version: number) {
	return store.put(endpointsKey(target), targetMemorySchema.parse(memory), version);
}
