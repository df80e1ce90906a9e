/**
 * The daemon's desired set, loaded each cycle: sources and renewal (through desired/), behind the cluster's gate,
 * with the audit line of each deliberate replacement in effect and a warning for staging nothing cleans up.
 */
import type { Config } from "../config/schema.js";
import { createDesiredLoader, type LoadedDesired } from "../desired/index.js";
import { CertificateeError } from "../errors.js";
import type { Logger } from "../log.js";
import type { DesiredSet } from "../reconcile/model.js";
import type { RenewalStatus } from "../renewal/status.js";
import type { BuiltSources } from "../sources/registry.js";
import type { StateStore } from "../store/types.js";
import { leftStaging } from "../targets/registry.js";
import type { ClusterRuntime } from "./cluster.js";
import { REPLACEMENT_IN_EFFECT } from "./summary.js";

export interface DesiredLoading {
	loadDesired(signal: AbortSignal): Promise<DesiredSet>;
	/** Each certificate's renewal status, as the last load left it. */
	statuses(): RenewalStatus[];
}

export function createDesiredLoading(
	config: Config,
	deps: {
		built: BuiltSources;
		/** Where replacements and renewal state are kept: etcd in a cluster, else the state directory. */
		store: StateStore;
		cluster: ClusterRuntime | undefined;
		readOnly: boolean;
		log: Logger;
		now: () => Date;
		random: (() => number) | undefined;
	},
): DesiredLoading {
	const { cluster, log } = deps;
	const load = createDesiredLoader(
		{
			sources: deps.built.sources,
			replacements: deps.store,
			renewal: {
				store: deps.store,
				issuers: deps.built.issuers,
				certificates: config.certificates,
				settings: config.renewal,
				log,
				...(cluster ? { issueLock: cluster.issueLock } : {}),
			},
			now: deps.now,
			...(deps.random ? { random: deps.random } : {}),
		},
		// In a cluster only the leader orders, and only while its lease is valid by its own clock.
		{ order: cluster ? () => cluster.canOrder() : !deps.readOnly },
	);
	let statuses: RenewalStatus[] = [];
	const reported = new Set<string>();
	// Deliberate replacements logged (once each: certificate and fingerprint).
	const replacing = new Set<string>();
	const loadDesired = async (signal: AbortSignal): Promise<DesiredSet> => {
		// Nothing is pushed that was not read from etcd under a valid lease: the whole cycle waits instead.
		if (cluster?.blocked()) await cluster.settled(2 * (config.cluster?.etcd.deadline ?? 2000));
		const blocked = cluster?.blocked();
		if (blocked) throw blocked;
		const loaded = await load(signal);
		logReplacements(loaded, replacing, log);
		const unreachable = config.cluster ? clusterUnreachable(loaded.renewal) : undefined;
		if (unreachable) throw unreachable;
		statuses = loaded.renewal;
		await warnLeftStaging(config, loaded, reported, log);
		return loaded;
	};
	return { loadDesired, statuses: () => statuses };
}

/** The audit line of each deliberate replacement the first time its certificate and fingerprint are loaded. */
function logReplacements(loaded: LoadedDesired, replacing: Set<string>, log: Logger): void {
	for (const c of loaded.certificates) {
		const key = `${c.name} ${c.bundle.leaf.fingerprint}`;
		if (!c.replacement || replacing.has(key)) continue;
		replacing.add(key);
		log.info(
			{
				audit: "replacement",
				certificate: c.name,
				by: c.replacement.by,
				reason: c.replacement.reason,
				requestedAt: c.replacement.requestedAt,
				...(c.replacement.replaces
					? { oldSerial: c.replacement.replaces.serial, oldNotAfter: c.replacement.replaces.notAfter }
					: {}),
				newSerial: c.bundle.leaf.serial,
				newNotAfter: c.bundle.leaf.notAfter.toISOString(),
			},
			REPLACEMENT_IN_EFFECT,
		);
	}
}

/** Every cycle (the first at start): staging no configured directory target will ever clean up, once each. */
async function warnLeftStaging(
	config: Config,
	loaded: LoadedDesired,
	reported: Set<string>,
	log: Logger,
): Promise<void> {
	for (const path of await leftStaging(
		config.targets,
		loaded.certificates.map((c) => c.name),
	)) {
		if (reported.has(path)) continue;
		reported.add(path);
		log.warn(
			{ path },
			"staging left by a directory target or certificate no longer configured (may hold private keys): not removed; delete it once nothing writes there",
		);
	}
}

/**
 * A certificate whose state etcd did not return: the cycle stops rather than push a desired set that lacks it
 * (a target would then see fewer certificates than there are).
 */
function clusterUnreachable(statuses: readonly RenewalStatus[]): CertificateeError | undefined {
	const failed = statuses.find((s) => s.lastError?.code === "CLUSTER_UNAVAILABLE");
	if (!failed?.lastError) return undefined;
	return new CertificateeError("CLUSTER_UNAVAILABLE", failed.lastError.message, {
		context: { certificate: failed.name },
		...(failed.lastError.hint ? { hint: failed.lastError.hint } : {}),
		retryable: true,
	});
}
