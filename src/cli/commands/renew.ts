/**
 * `certificatee renew NAME [--force]` and `certificatee revoke NAME [--reason R]`: an operator's order, recorded
 * in the certificate's renewal state (so the request and its count survive the process), then one sync cycle
 * that orders it and pushes the result to every target.
 */
import type { Config } from "../../config/schema.js";
import { openClusterReader } from "../../daemon/cluster.js";
import { CertificateeError } from "../../errors.js";
import { requestRenewal, revokeLatest } from "../../renewal/request.js";
import type { CertificateSpec } from "../../renewal/schema.js";
import { createDirectorySource } from "../../sources/directory/index.js";
import { buildSources } from "../../sources/registry.js";
import { REVOCATION_REASONS, type RevocationReason } from "../../sources/types.js";
import { readCertificateRecord } from "../../store/records.js";
import type { StateStore } from "../../store/types.js";
import type { CommandContext } from "../context.js";
import { clusterRecorded, waitClusterServed } from "./cluster-wait.js";
import { syncCommand } from "./cycle.js";
import { askDaemon, openLocalOrDaemon, waitMs } from "./daemon-request.js";

/**
 * The certificate spec, or CONFIG_INVALID: for a name a directory source serves, saying that certificatee
 * serves that file and does not order it.
 */
async function certificateNamed(config: Config, name: string): Promise<CertificateSpec> {
	const spec = config.certificates.find((c) => c.name === name);
	if (spec) return spec;
	for (const source of config.sources) {
		if (source.type !== "directory") continue;
		const found = (await createDirectorySource(source).load(new AbortController().signal)).certificates.find(
			(c) => c.name === name,
		);
		if (found) {
			throw new CertificateeError(
				"CONFIG_INVALID",
				`"${name}" comes from the directory source "${source.name}" (${found.origin.replace(/^source [^:]*: /, "")}): certificatee serves that file as it is and does not order it`,
				{
					context: { field: "certificates", certificate: name },
					hint: `put the renewed certificate in its place (the daemon picks it up within the source's debounce), or manage it under certificates: with an issuer`,
				},
			);
		}
	}
	throw new CertificateeError("CONFIG_INVALID", `no certificate named "${name}"`, {
		context: { field: "certificates", certificate: name },
		hint: `configured certificates: ${config.certificates.map((c) => c.name).join(", ") || "none"}`,
	});
}

function maxOrders(config: Config): { maxOrdersPerDay?: number } {
	const limit = config.renewal?.max_orders_per_day;
	return limit === undefined ? {} : { maxOrdersPerDay: limit };
}

export async function renewCommand(
	ctx: CommandContext,
	name: string,
	options: { force?: boolean; wait?: string },
): Promise<void> {
	const { config } = ctx.loadConfig();
	await certificateNamed(config, name);
	const force = options.force === true;
	const wait = waitMs(options.wait);
	if (config.cluster) {
		const reader = openClusterReader(config.cluster);
		const requestedAt = new Date();
		let before: string | undefined;
		try {
			before = (await readCertificateRecord(reader.store, name))?.value.history[0]?.serial;
			await requestRenewal(reader.store, name, { force, now: requestedAt, ...maxOrders(config) });
		} finally {
			await reader.close();
		}
		logRequested(ctx, name, force);
		clusterRecorded(ctx, name);
		return waitClusterServed(ctx, config, { certificate: name, kind: "renew", before, requestedAt, wait });
	}
	const local = await openLocalOrDaemon(config);
	if ("daemon" in local)
		return askDaemon(ctx, config, local.daemon, { kind: "renew", certificate: name, force }, wait);
	try {
		await requestRenewal(local.store, name, { force, now: new Date(), ...maxOrders(config) });
	} finally {
		local.store.close();
	}
	logRequested(ctx, name, force);
	return syncCommand(ctx);
}

function logRequested(ctx: CommandContext, name: string, force: boolean): void {
	ctx.log.info(
		{ certificate: name, force },
		force
			? "renewal forced by an operator: backoff and daily cap cleared"
			: "renewal requested by an operator",
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
	options: { reason?: string; wait?: string },
): Promise<void> {
	const { config } = ctx.loadConfig();
	await certificateNamed(config, name);
	const reason = parseRevocationReason(options.reason ?? "unspecified");
	const wait = waitMs(options.wait);
	let shared: { store: StateStore; close(): Promise<void> };
	if (config.cluster) {
		const reader = openClusterReader(config.cluster);
		shared = { store: reader.store, close: () => reader.close() };
	} else {
		const local = await openLocalOrDaemon(config);
		if ("daemon" in local) {
			return askDaemon(
				ctx,
				config,
				local.daemon,
				{ kind: "revoke", certificate: name, force: true, reason },
				wait,
			);
		}
		shared = { store: local.store, close: async () => local.store.close() };
	}
	const store = shared.store;
	const requestedAt = new Date();
	let before: string | undefined;
	try {
		before = (await readCertificateRecord(store, name))?.value.history[0]?.serial;
		const built = await buildSources(config.sources, { store });
		try {
			const revoked = await revokeLatest(store, built.issuers, name, reason, AbortSignal.timeout(120_000));
			ctx.log.info({ certificate: name, ...revoked, reason }, "certificate revoked");
		} finally {
			await built.close();
		}
		await requestRenewal(store, name, { force: true, now: new Date(), ...maxOrders(config) });
	} finally {
		await shared.close();
	}
	if (config.cluster) {
		clusterRecorded(ctx, name);
		return waitClusterServed(ctx, config, { certificate: name, kind: "revoke", before, requestedAt, wait });
	}
	return syncCommand(ctx);
}
