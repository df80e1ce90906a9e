/**
 * The ACME issuer (`type: acme`): orders certificates from an ACME CA with acme-client, answering HTTP-01
 * with the built-in responder or HAProxy maps on a fleet, and DNS-01 through RFC 2136 updates or the
 * operator's hook. One account per issuer, kept in the state store and reused; a new private key per issuance;
 * at most `concurrency` orders in flight. Each step is a module: issuer-context (what they share), registration
 * (the account), order, renewal-info, revocation.
 */
import pLimit from "p-limit";
import type { Issuer, RenewalWindow } from "../types.js";
import { type AcmeIssuerDeps, issuerContext } from "./issuer-context.js";
import { issueCertificate } from "./order.js";
import { accountHolder, rolloverAccountKey } from "./registration.js";
import { fetchRenewalWindow } from "./renewal-info.js";
import { revokeCertificate } from "./revocation.js";
import type { AcmeSourceConfig } from "./schema.js";

export { type AccountStore, type StoredAccount, storedAccount } from "./account.js";
export { ariCertId } from "./ari.js";
export type { AcmeIssuerDeps, AcmeLogger } from "./issuer-context.js";
export { directoryProfiles, unknownProfile } from "./profiles.js";
export { type AcmeSourceConfig, acmeSourceSchema } from "./schema.js";

/** An Issuer that holds a connection pool: close() it when the issuer is dropped. */
export interface AcmeIssuer extends Issuer {
	renewalWindow(certPem: string, signal: AbortSignal): Promise<RenewalWindow | undefined>;
	/** RFC 8555 §7.3.5 keyChange: a new account key, stored before the old one is dropped. Returns the account URL. */
	rolloverKey(signal: AbortSignal): Promise<string>;
	close(): Promise<void>;
}

export function createAcmeIssuer(config: AcmeSourceConfig, deps: AcmeIssuerDeps): AcmeIssuer {
	const ctx = issuerContext(config, deps);
	const accounts = accountHolder(ctx);
	const limit = pLimit(config.concurrency);
	return {
		name: config.name,
		issue: (request, signal) => limit(() => issueCertificate(ctx, accounts, request, signal)),
		renewalWindow: (certPem, signal) => fetchRenewalWindow(ctx, certPem, signal),
		revoke: (certPem, reason, signal) => revokeCertificate(ctx, accounts, certPem, reason, signal),
		rolloverKey: (signal) => rolloverAccountKey(ctx, accounts, signal),
		...(ctx.responder?.prepare ? { prepare: (signal: AbortSignal) => ctx.responder!.prepare!(signal) } : {}),
		close: async () => {
			await Promise.all([ctx.agent.close(), ctx.responder?.close?.()]);
		},
	};
}
