/**
 * One order: ask the issuer, check what it returned with the certificate model (an invalid result is a
 * failure and is never stored), then store it in the certificate's history. Failure is a value.
 */
import { loadBundle } from "../certificates/index.js";
import type { Bundle } from "../certificates/types.js";
import { CertificateeError, describeError, isCertificateeError } from "../errors.js";
import type { Issuer } from "../sources/types.js";
import {
	type CertificateRecord,
	type IssuedCertificate,
	type StoredRecord,
	storeIssued,
} from "../store/records.js";
import type { StateStore } from "../store/types.js";
import type { CertificateSpec } from "./schema.js";

export type OrderResult =
	| { ok: true; bundle: Bundle; jitter: number; profile?: string }
	| { ok: false; error: CertificateeError };

export interface OrderDeps {
	store: StateStore;
	issuer: Issuer;
	spec: CertificateSpec;
	/** The record read before deciding: the history is extended with compare-and-swap on its version. */
	previous: StoredRecord<CertificateRecord> | undefined;
}

export async function order(
	deps: OrderDeps,
	run: { now: Date; random: () => number; signal: AbortSignal },
): Promise<OrderResult> {
	const { issuer, spec } = deps;
	const source = `issuer ${issuer.name}: ${spec.name}`;
	// Only a certificate from the same issuer can be replaced in the CA's eyes.
	const replaced = deps.previous?.value.history.find((h) => h.issuer === issuer.name);
	let issued: Awaited<ReturnType<Issuer["issue"]>>;
	try {
		issued = await issuer.issue(
			{
				certificate: spec.name,
				domains: spec.domains,
				keyType: spec.key_type,
				...(spec.lifetime !== undefined ? { lifetimeMs: spec.lifetime } : {}),
				...(spec.profile !== undefined ? { profile: spec.profile } : {}),
				...(replaced ? { replaces: replaced.certPem } : {}),
			},
			run.signal,
		);
	} catch (e) {
		const error = isCertificateeError(e)
			? e
			: new CertificateeError("ISSUE_FAILED", `${source}: ${describeError(e)}`, {
					retryable: true,
					cause: e,
				});
		return { ok: false, error };
	}
	const loaded = loadBundle(
		{ cert: issued.certPem, chain: issued.chainPem, key: issued.keyPem },
		{ source, now: run.now, requiredNames: spec.domains },
	);
	if (!loaded.ok) {
		const first = loaded.problems[0];
		const error = new CertificateeError(
			"ISSUE_FAILED",
			`${source}: the issued certificate is invalid: ${first?.message ?? "unknown problem"}`,
			{ context: { certificate: spec.name }, retryable: true, cause: first },
		);
		return { ok: false, error };
	}
	await storeIssued(
		deps.store,
		spec.name,
		issuedRecord(loaded.bundle, spec, issuer.name, run.now, issued.profile),
		deps.previous,
	);
	// Drawn once, when the certificate is stored; the policy only reads it afterwards.
	return {
		ok: true,
		bundle: loaded.bundle,
		jitter: run.random(),
		...(issued.profile !== undefined ? { profile: issued.profile } : {}),
	};
}

function issuedRecord(
	bundle: Bundle,
	spec: CertificateSpec,
	issuer: string,
	now: Date,
	profile: string | undefined,
): IssuedCertificate {
	return {
		certPem: bundle.certPem,
		chainPem: bundle.chainPem,
		keyPem: bundle.key.reveal(),
		// Which issuer of the fallback list issued it.
		issuer,
		domains: spec.domains,
		keyType: spec.key_type,
		serial: bundle.leaf.serial,
		notBefore: bundle.leaf.notBefore.toISOString(),
		notAfter: bundle.leaf.notAfter.toISOString(),
		issuedAt: now.toISOString(),
		...(profile !== undefined ? { profile } : {}),
	};
}
