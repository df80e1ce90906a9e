/**
 * The certificate in service: the newest one stored for a managed certificate, parsed and compared with its
 * configuration, and whether it may be served (desired) at a given time.
 */
import { checkBundle, nameSet, parseBundle, sameNameSet } from "../certificates/index.js";
import type { Bundle } from "../certificates/types.js";
import { isCertificateeError } from "../errors.js";
import type { DesiredCertificate, SourceProblem } from "../reconcile/model.js";
import type { CertificateRecord, StoredRecord } from "../store/records.js";
import type { CertificateSpec } from "./schema.js";

/** The stored certificate, and what changed in the configuration since it was issued. */
export interface InService {
	bundle: Bundle;
	/** Names, key type or issuer changed: the policy renews now. */
	mismatch?: string;
}

/** The newest stored certificate, parsed; a mismatch with the config (names, key type, issuer) is noted. */
export function currentBundle(
	record: StoredRecord<CertificateRecord> | undefined,
	spec: CertificateSpec,
	problems: SourceProblem[],
): InService | undefined {
	const latest = record?.value.history[0];
	if (!latest) return undefined;
	let bundle: Bundle;
	try {
		bundle = parseBundle(
			{ cert: latest.certPem, chain: latest.chainPem, key: latest.keyPem },
			{ source: `state certificates/${spec.name}` },
		);
	} catch (e) {
		if (isCertificateeError(e)) problems.push({ subject: spec.name, error: e });
		return undefined;
	}
	const mismatch = !sameNameSet(latest.domains, spec.domains)
		? `names changed: ${nameSet(latest.domains).join(", ")} -> ${nameSet(spec.domains).join(", ")}`
		: latest.keyType !== spec.key_type
			? `key type changed: ${latest.keyType} -> ${spec.key_type}`
			: !spec.issuers.includes(latest.issuer)
				? `issuer changed: ${latest.issuer} -> ${spec.issuers.join(", ")}`
				: undefined;
	return { bundle, ...(mismatch ? { mismatch } : {}) };
}

/** The stored certificate is desired while it is valid at `now`, even when its names no longer match. */
export function servable(
	bundle: Bundle,
	spec: CertificateSpec,
	now: Date,
	problems: SourceProblem[],
): DesiredCertificate | undefined {
	const errors = checkBundle(bundle, { source: `state certificates/${spec.name}`, now });
	if (errors.length > 0) {
		for (const error of errors) problems.push({ subject: spec.name, error });
		return undefined;
	}
	return {
		name: spec.name,
		names: nameSet([...bundle.leaf.dnsNames, ...bundle.leaf.ipAddresses]),
		bundle,
		origin: `issuer ${spec.issuer}: ${spec.name} (serial ${bundle.leaf.serial})`,
	};
}
