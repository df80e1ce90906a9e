/** Checks that depend on time and configuration: validity dates and required names. Pure. */
import { CertificateeError } from "../errors.js";
import { uncoveredNames } from "./names.js";
import type { Bundle } from "./types.js";

export interface CheckOptions {
	source: string;
	now: Date;
	/** Names the configuration says this certificate must cover. */
	requiredNames?: readonly string[];
	/**
	 * How far in the future a notBefore may be and still count as valid (clock skew between the CA and
	 * this machine; some CAs stamp notBefore with the second they sign). Default 5 minutes.
	 */
	skewMs?: number;
}

export const DEFAULT_SKEW_MS = 5 * 60_000;

/**
 * The first moment after `now` at which checkBundle's answer for this bundle can change (a certificate of it
 * expiring or becoming valid), or Infinity: until then, with the same options, the answer stays what it is now.
 */
export function checkChangesAfter(bundle: Bundle, now: Date, skewMs = DEFAULT_SKEW_MS): number {
	let first = Number.POSITIVE_INFINITY;
	for (const cert of [bundle.leaf, ...bundle.chain]) {
		for (const at of [cert.notAfter.getTime(), cert.notBefore.getTime() - skewMs]) {
			if (at > now.getTime() && at < first) first = at;
		}
	}
	return first;
}

/** Every problem with a parsed bundle, empty when it may be pushed. */
export function checkBundle(bundle: Bundle, options: CheckOptions): CertificateeError[] {
	const { source, now } = options;
	const problems: CertificateeError[] = [];
	const context = { file: source };
	for (const [i, cert] of [bundle.leaf, ...bundle.chain].entries()) {
		const what = i === 0 ? "the certificate" : `intermediate "${cert.subject}"`;
		if (cert.notAfter.getTime() <= now.getTime()) {
			problems.push(
				new CertificateeError(
					"BUNDLE_EXPIRED",
					`${source}: ${what} expired at ${cert.notAfter.toISOString()}`,
					{
						context,
						hint: "renew it; certificatee never pushes an expired certificate",
					},
				),
			);
		} else if (cert.notBefore.getTime() > now.getTime() + (options.skewMs ?? DEFAULT_SKEW_MS)) {
			problems.push(
				new CertificateeError(
					"BUNDLE_NOT_YET_VALID",
					`${source}: ${what} is not valid before ${cert.notBefore.toISOString()}`,
					{ context, hint: "check the clock of the machine that issued it", retryable: true },
				),
			);
		}
	}
	const missing = uncoveredNames(
		[...bundle.leaf.dnsNames, ...bundle.leaf.ipAddresses],
		options.requiredNames ?? [],
	);
	if (missing.length > 0) {
		problems.push(
			new CertificateeError(
				"BUNDLE_NAMES_NOT_COVERED",
				`${source}: the certificate does not cover ${missing.join(", ")} (it covers ${[...bundle.leaf.dnsNames, ...bundle.leaf.ipAddresses].join(", ") || "no names"})`,
				{ context, hint: "issue a certificate whose subjectAltName lists every configured name" },
			),
		);
	}
	return problems;
}
