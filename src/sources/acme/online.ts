/** `validate --online` for an acme source: its directory (GET), and the profiles ordered from it checked against it. */
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";
import { type OnlineContext, type PendingCheck, safeUrl } from "../../base/online.js";
import { CertificateeError } from "../../errors.js";
import { directoryProfiles, unknownProfile } from "./profiles.js";
import type { AcmeSourceConfig } from "./schema.js";

export function acmeOnlineChecks(s: AcmeSourceConfig, context: OnlineContext): PendingCheck[] {
	return [acmeDirectory(s.name, s.directory_url, s.ca_file, 10_000, wantedProfiles(s, context))];
}

/** A profile the configuration orders from an ACME issuer, and where it is set. */
interface WantedProfile {
	profile: string;
	certificate?: string;
	field: string;
}

/** Every profile ordered from the source: its own default, and each certificate's own. */
function wantedProfiles(s: AcmeSourceConfig, context: OnlineContext): WantedProfile[] {
	const source = s.name;
	const wanted: WantedProfile[] = s.profile
		? [{ profile: s.profile, field: `sources.${source}.profile` }]
		: [];
	context.certificates.forEach((c, i) => {
		if (c.profile && c.issuers.includes(source))
			wanted.push({ profile: c.profile, certificate: c.name, field: `certificates[${i}].profile` });
	});
	return wanted;
}

function acmeDirectory(
	name: string,
	url: string,
	caFile: string | undefined,
	timeoutMs: number,
	profiles: WantedProfile[] = [],
): PendingCheck {
	return {
		kind: "acme-directory",
		name,
		address: safeUrl(url),
		hint: "check directory_url, that the ACME server is reachable from this host, and ca_file for a private CA",
		run: async (signal) => {
			const ca = caFile === undefined ? undefined : readFileSync(caFile, "utf8");
			const dispatcher = new Agent({ connect: ca ? { ca } : {}, connectTimeout: timeoutMs });
			try {
				const res = await request(url, {
					dispatcher,
					signal,
					headersTimeout: timeoutMs,
					bodyTimeout: timeoutMs,
				});
				const body = await res.body.text();
				let directory: { newNonce?: unknown; newAccount?: unknown; newOrder?: unknown } | undefined;
				try {
					directory = JSON.parse(body) as typeof directory;
				} catch {
					directory = undefined;
				}
				if (res.statusCode !== 200 || typeof directory?.newOrder !== "string") {
					throw new CertificateeError(
						"ENDPOINT_UNAVAILABLE",
						`source ${name}: ${safeUrl(url)} answered ${res.statusCode} without an ACME directory (newOrder)`,
						{
							context: { endpoint: name, field: "directory_url" },
							hint: "directory_url must be the CA's ACME directory URL",
						},
					);
				}
				// draft-ietf-acme-profiles: the profiles it offers, and each configured one checked against them.
				const offered = directoryProfiles(directory);
				for (const w of profiles) {
					const refused = unknownProfile(w.profile, offered, {
						issuer: name,
						...(w.certificate ? { certificate: w.certificate } : {}),
						endpoint: safeUrl(url),
						field: w.field,
					});
					if (refused) throw refused;
				}
				const listed = offered ? Object.keys(offered) : [];
				return `ACME directory (newAccount, newOrder${typeof directory.newNonce === "string" ? ", newNonce" : ""}); profiles: ${listed.length > 0 ? listed.join(", ") : "none listed"}`;
			} finally {
				await dispatcher.close();
			}
		},
	};
}
