/**
 * ACME profiles (draft-ietf-acme-profiles): the CA lists the profiles it offers in its directory's
 * `meta.profiles` (name → a human-readable description, often a URL), the client names one in newOrder's
 * `profile`, and the CA echoes it in the order object. Pure: the directory is passed in.
 */
import { CertificateeError } from "../../errors.js";

/** `meta.profiles` of a directory, or undefined when the CA lists none (it then offers no choice). */
export function directoryProfiles(directory: unknown): Record<string, string> | undefined {
	const meta = (directory as { meta?: unknown } | null)?.meta;
	const profiles = (meta as { profiles?: unknown } | null | undefined)?.profiles;
	if (profiles === null || typeof profiles !== "object" || Array.isArray(profiles)) return undefined;
	return Object.fromEntries(Object.entries(profiles).map(([name, about]) => [name, String(about)]));
}

export interface ProfileSubject {
	issuer: string;
	/** The certificate it is ordered for, when there is one (validate --online checks the configuration). */
	certificate?: string;
	endpoint: string;
	/** Where the profile was set, for the message: `profile` of a certificate or of the issuer. */
	field: string;
}

/** Why `profile` cannot be ordered from a CA offering `offered`, or undefined when it can. */
export function unknownProfile(
	profile: string,
	offered: Record<string, string> | undefined,
	subject: ProfileSubject,
): CertificateeError | undefined {
	if (offered && Object.hasOwn(offered, profile)) return undefined;
	const names = Object.keys(offered ?? {});
	const of = subject.certificate ? ` of certificate "${subject.certificate}"` : "";
	const list = names.length > 0 ? `it offers: ${names.join(", ")}` : "it lists no profiles in its directory";
	return new CertificateeError(
		"CONFIG_INVALID",
		`ACME profile "${profile}"${of} is not offered by issuer "${subject.issuer}" (${subject.endpoint}): ${list}`,
		{
			context: {
				endpoint: subject.endpoint,
				field: subject.field,
				operation: "new order",
				...(subject.certificate ? { certificate: subject.certificate } : {}),
			},
			hint:
				names.length > 0
					? `set ${subject.field} to one of: ${names.join(", ")} (certificatee validate --online lists them)`
					: `remove ${subject.field}: this CA does not support ACME profiles (or point directory_url at one that does)`,
			retryable: false,
		},
	);
}
