/**
 * An operator's order (`renew NAME [--force]`, `revoke NAME`), applied to the certificate's renewal state: the
 * next renewal run orders it whatever the policy says. The same code runs in the command (no daemon) and in the
 * daemon (a request the command left in `state_dir/requests/`).
 */
import { CertificateeError } from "../errors.js";
import type { Issuer, RevocationReason } from "../sources/types.js";
import {
	type RenewalRecord,
	readCertificateRecord,
	readRenewalRecord,
	writeRenewalRecord,
} from "../store/records.js";
import type { StateStore } from "../store/types.js";
import { POLICY_DEFAULTS } from "./policy.js";

const DAY = 86_400_000;

/** Records the request; without `force`, refuses (ISSUE_FAILED) while the certificate backs off or is capped. */
export async function requestRenewal(
	store: StateStore,
	name: string,
	options: { force: boolean; now: Date; maxOrdersPerDay?: number },
): Promise<void> {
	const { force, now } = options;
	const stored = await readRenewalRecord(store, name);
	const state: RenewalRecord = stored?.value ?? { jitter: Math.random(), failures: 0, orders: [] };
	if (!force) {
		const recent = state.orders.filter((o) => Date.parse(o) > now.getTime() - DAY).length;
		const limit = options.maxOrdersPerDay ?? POLICY_DEFAULTS.maxOrdersPerDay;
		const next = state.nextAttemptAt ? Date.parse(state.nextAttemptAt) : 0;
		const blocked =
			recent >= limit
				? `the daily cap is reached (${recent} orders in 24 h, limit ${limit})`
				: state.failures > 0 && next > now.getTime()
					? `it is backing off after ${state.failures} failure(s) until ${state.nextAttemptAt} (last error ${state.lastError?.code ?? "unknown"})`
					: undefined;
		if (blocked) {
			throw new CertificateeError("ISSUE_FAILED", `not renewing "${name}": ${blocked}`, {
				context: { certificate: name, operation: "renew" },
				hint: `fix the cause, then: certificatee renew ${name} --force (clears the backoff and the daily cap for it)`,
			});
		}
	}
	const { lastFailureAt: _f, ...rest } = state;
	const next: RenewalRecord = force
		? {
				...rest,
				failures: 0,
				orders: [],
				forceRequestedAt: now.toISOString(),
				forcedRenewals: (state.forcedRenewals ?? 0) + 1,
			}
		: { ...state, forceRequestedAt: now.toISOString() };
	await writeRenewalRecord(store, name, next, stored?.version ?? 0);
}

/** Revokes the certificate's latest issue through the issuer that issued it; returns what was revoked. */
export async function revokeLatest(
	store: StateStore,
	issuers: ReadonlyMap<string, Issuer>,
	name: string,
	reason: RevocationReason,
	signal: AbortSignal,
): Promise<{ serial: string; issuer: string }> {
	const latest = (await readCertificateRecord(store, name))?.value.history[0];
	if (!latest) {
		throw new CertificateeError(
			"NOT_AVAILABLE",
			`certificate "${name}" was never issued; nothing to revoke`,
			{
				context: { certificate: name, operation: "revoke" },
				hint: `certificatee renew ${name} orders it`,
			},
		);
	}
	const issuer = issuers.get(latest.issuer);
	if (!issuer?.revoke) {
		throw new CertificateeError(
			"CONFIG_INVALID",
			`issuer "${latest.issuer}" of "${name}" is not configured or cannot revoke`,
			{
				context: { certificate: name, field: "sources" },
				hint: `the certificate (serial ${latest.serial}) was issued by "${latest.issuer}": configure that source to revoke it`,
			},
		);
	}
	await issuer.revoke(latest.certPem, reason, signal);
	return { serial: latest.serial, issuer: latest.issuer };
}
