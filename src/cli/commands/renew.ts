/**
 * `certificatee renew NAME [--force]` and `certificatee revoke NAME [--reason R]`: an operator's order, recorded
 * in the certificate's renewal state (so the request and its count survive the process), then one sync cycle
 * that orders it and pushes the result to every target.
 */
import type { Config } from "../../config/schema.js";
import { openClusterReader } from "../../daemon/cluster.js";
import { CertificateeError } from "../../errors.js";
import { POLICY_DEFAULTS } from "../../renewal/policy.js";
import type { CertificateSpec } from "../../renewal/schema.js";
import { buildSources } from "../../sources/registry.js";
import { REVOCATION_REASONS, type RevocationReason } from "../../sources/types.js";
import { openFileStore } from "../../store/file-store.js";
import {
	type RenewalState,
	readCertificateRecord,
	readRenewalState,
	writeRenewalState,
} from "../../store/records.js";
import type { StateStore } from "../../store/types.js";
import type { CommandContext } from "../context.js";
import { syncCommand } from "./cycle.js";

const DAY = 86_400_000;

function certificateNamed(config: Config, name: string): CertificateSpec {
	const spec = config.certificates.find((c) => c.name === name);
	if (!spec) {
		throw new CertificateeError("CONFIG_INVALID", `no certificate named "${name}"`, {
			context: { field: "certificates", certificate: name },
			hint: `configured certificates: ${config.certificates.map((c) => c.name).join(", ") || "none"}`,
		});
	}
	return spec;
}

/** Records the request; without `force`, refuses while the certificate backs off or the daily cap holds. */
async function requestRenewal(
	store: StateStore,
	config: Config,
	name: string,
	force: boolean,
	now: Date,
): Promise<void> {
	const stored = await readRenewalState(store, name);
	const state: RenewalState = stored?.value ?? { jitter: Math.random(), failures: 0, orders: [] };
	if (!force) {
		const recent = state.orders.filter((o) => Date.parse(o) > now.getTime() - DAY).length;
		const limit = config.renewal?.max_orders_per_day ?? POLICY_DEFAULTS.maxOrdersPerDay;
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
	const next: RenewalState = force
		? {
				...rest,
				failures: 0,
				orders: [],
				forceRequestedAt: now.toISOString(),
				forcedRenewals: (state.forcedRenewals ?? 0) + 1,
			}
		: { ...state, forceRequestedAt: now.toISOString() };
	await writeRenewalState(store, name, next, stored?.version ?? 0);
}

export async function renewCommand(
	ctx: CommandContext,
	name: string,
	options: { force?: boolean },
): Promise<void> {
	const { config } = ctx.loadConfig();
	certificateNamed(config, name);
	const force = options.force === true;
	const shared = await openSharedStore(config);
	try {
		await requestRenewal(shared.store, config, name, force, new Date());
	} finally {
		await shared.close();
	}
	ctx.log.info(
		{ certificate: name, force },
		force
			? "renewal forced by an operator: backoff and daily cap cleared"
			: "renewal requested by an operator",
	);
	await afterRequest(ctx, config, name);
}

/**
 * Where the request is recorded: the state directory, or etcd in a cluster (compare-and-swap, no lease: this
 * process does not join the cluster).
 */
async function openSharedStore(config: Config): Promise<{ store: StateStore; close(): Promise<void> }> {
	if (config.cluster) {
		const reader = openClusterReader(config.cluster);
		return { store: reader.store, close: () => reader.close() };
	}
	const store = await openFileStore(config.state_dir);
	return { store, close: async () => store.close() };
}

/** Alone, one sync cycle orders and pushes it now; in a cluster the leader sees the request through its watch. */
async function afterRequest(ctx: CommandContext, config: Config, name: string): Promise<void> {
	if (!config.cluster) return syncCommand(ctx);
	ctx.log.info(
		{ certificate: name },
		"request recorded in etcd: the leader orders it within seconds and every member pushes it (certificatee status shows it)",
	);
}

export function parseRevocationReason(text: string): RevocationReason {
	if (text in REVOCATION_REASONS) return text as RevocationReason;
	throw new CertificateeError("CONFIG_INVALID", `unknown revocation reason "${text}"`, {
		context: { field: "--reason" },
		hint: `one of: ${Object.keys(REVOCATION_REASONS).join(", ")}`,
	});
}

export async function revokeCommand(
	ctx: CommandContext,
	name: string,
	options: { reason?: string },
): Promise<void> {
	const { config } = ctx.loadConfig();
	certificateNamed(config, name);
	const reason = parseRevocationReason(options.reason ?? "unspecified");
	const shared = await openSharedStore(config);
	const store = shared.store;
	try {
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
		const built = await buildSources(config.sources, { store });
		const { issuers } = built;
		const issuer = issuers.get(latest.issuer);
		try {
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
			await issuer.revoke(latest.certPem, reason, AbortSignal.timeout(120_000));
		} finally {
			await built.close();
		}
		ctx.log.info(
			{ certificate: name, serial: latest.serial, issuer: latest.issuer, reason },
			"certificate revoked",
		);
		await requestRenewal(store, config, name, true, new Date());
	} finally {
		await shared.close();
	}
	await afterRequest(ctx, config, name);
}
