import { z } from "zod";
import { duration } from "../base/duration.js";

export const keyTypeSchema = z.enum(["ecdsa-p256", "ecdsa-p384", "rsa-2048", "rsa-4096"]);

/** One entry of the config's `certificates` list: a certificate certificatee issues and renews itself. */
const certificateSpecFields = z.strictObject({
	/** Its name everywhere: state store key, target file name, reports. */
	name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "letters, digits, '.', '_' and '-' only"),
	/** DNS names and IP addresses it must cover; the first is the subject CN. */
	domains: z.array(z.string().min(1)).min(1),
	/** The `name` of a configured issuer source (local-ca or acme). */
	issuer: z.string().min(1).optional(),
	/** Issuers in order of preference (instead of `issuer`): after a permanent failure, or `fallback_after`
	 * transient ones in a row, the next is tried at once. */
	issuers: z.array(z.string().min(1)).min(1).optional(),
	fallback_after: z.number().int().min(1).default(3),
	key_type: keyTypeSchema.default("ecdsa-p256"),
	/** Renew this long before expiry; overrides renew_fraction. */
	renew_before: duration.optional(),
	/** Renew when less than this fraction of the lifetime is left (default 1/3). */
	renew_fraction: z.number().gt(0).lt(1).optional(),
	/** ACME profile to order (draft-ietf-acme-profiles), overriding the issuer's `profile`; ACME issuers only. */
	profile: z.string().min(1).optional(),
	/** Requested lifetime, for issuers that choose it (local CA). */
	lifetime: duration.optional(),
	/** A PEM bundle (or `system`) its chain must verify against before it is pushed to any target (docs/rollouts.md). */
	trust_store: z.string().min(1).optional(),
});
/** `issuer` is always the first preferred issuer and `issuers` the whole list, whichever form was written. */
export const certificateSpecSchema = certificateSpecFields
	.refine((c) => (c.issuer === undefined) !== (c.issuers === undefined), {
		error: "give either issuer or issuers (a fallback list), not both",
		path: ["issuer"],
	})
	.transform((c) => {
		const issuers = c.issuers ?? [c.issuer ?? ""];
		return { ...c, issuer: issuers[0] ?? "", issuers };
	});
export type CertificateSpec = z.infer<typeof certificateSpecSchema>;

/** The config's `renewal` block: settings shared by every managed certificate. */
export const renewalSettingsSchema = z.strictObject({
	/** How many orders may run at once. */
	concurrency: z.number().int().min(1).default(4),
	/** Loop breaker: at most this many orders per certificate in any 24 h. */
	max_orders_per_day: z.number().int().min(1).default(5),
});
export type RenewalSettings = z.infer<typeof renewalSettingsSchema>;
