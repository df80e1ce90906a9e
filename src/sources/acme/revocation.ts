/** Revoking a certificate with the issuer's account (RFC 8555 §7.6). */
import { REVOCATION_REASONS, type RevocationReason } from "../types.js";
import type { IssuerContext } from "./issuer-context.js";
import { toAcmeError } from "./problem.js";
import type { AccountHolder } from "./registration.js";
import type { TransportContext } from "./transport.js";

/** Revokes the certificate with the reason given; the CA's answer is the only effect. */
export async function revokeCertificate(
	ictx: IssuerContext,
	accounts: AccountHolder,
	certPem: string,
	reason: RevocationReason,
	outer: AbortSignal,
): Promise<void> {
	const signal = AbortSignal.any([outer, AbortSignal.timeout(ictx.config.timeout)]);
	const ctx: TransportContext = { signal, problems: [] };
	try {
		const { key, url } = await accounts.ensure(signal);
		await ictx.newClient(key, url, ctx).revokeCertificate(certPem, { reason: REVOCATION_REASONS[reason] });
		ictx.logger.info({ issuer: ictx.config.name, reason }, "certificate revoked");
	} catch (e) {
		throw toAcmeError(e, {
			operation: "revocation",
			endpoint: ictx.directoryUrl,
			problems: ctx.problems,
			signal,
		});
	}
}
