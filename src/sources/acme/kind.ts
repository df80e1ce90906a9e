/**
 * The `acme` kind as the configuration sees it: an issuer that proves control of each name (HTTP-01 through its
 * responder or HAProxy maps, DNS-01 through a hook or RFC 2136), orders under CA profiles, counted in metrics.
 */
import type { RawEntry, SourceKind } from "../../base/kind.js";
import { acmeSourceSchema } from "./schema.js";

/** Proves names over DNS-01 (a hook or RFC 2136); without either, over HTTP-01 only (the built-in responder). */
const answersDns01 = (raw: RawEntry) => raw.dns_hook !== undefined || raw.dns01 !== undefined;

export const acmeSourceKind: SourceKind<"acme", typeof acmeSourceSchema> = {
	type: "acme",
	schema: acmeSourceSchema,
	role: "issuer",
	resolvePaths: (s, paths) => ({
		...s,
		...(s.ca_file === undefined ? {} : { ca_file: paths.file(s.ca_file) }),
		...(s.dns_hook === undefined ? {} : { dns_hook: paths.command(s.dns_hook) }),
		...(s.dns01 === undefined
			? {}
			: {
					dns01: {
						rfc2136: { ...s.dns01.rfc2136, tsig_secret_file: paths.file(s.dns01.rfc2136.tsig_secret_file) },
					},
				}),
	}),
	proofs: (raw, at) => ({
		...(answersDns01(raw)
			? {}
			: {
					wildcard: `has neither dns01 nor dns_hook: set ${at}.dns01.rfc2136 or ${at}.dns_hook, or list the names one by one`,
				}),
		...(raw.http01 === undefined && answersDns01(raw)
			? {
					ip: `answers only DNS-01: set ${at}.http01 (the built-in responder or via: haproxy-map), or order the IP from another issuer`,
				}
			: {}),
	}),
	profiles: true,
	countsOrders: true,
	challengeMaps(raw) {
		const http01 = raw.http01 as { via?: unknown; targets?: unknown; map?: unknown } | undefined;
		if (http01?.via !== "haproxy-map" || !Array.isArray(http01.targets)) return undefined;
		return { field: "http01.targets", targets: http01.targets as unknown[], map: http01.map };
	},
};
