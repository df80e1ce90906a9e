/**
 * From a configuration to a running engine: the state store, sources and issuers, the renewal manager
 * and the targets, wired into the cycle's dependencies. The only place that knows every part.
 */

import { loadTrustStore } from "../certificates/trust.js";
import type { Config, RolloutConfig } from "../config/schema.js";
import { createDesiredLoader } from "../desired/index.js";
import { CertificateeError, describeError } from "../errors.js";
import type { Logger } from "../log.js";
import type { ClusterView } from "../metrics/cluster.js";
import type { Metrics, RenewalView } from "../metrics/index.js";
import type { CycleDeps } from "../reconcile/cycle.js";
import type { DesiredSet } from "../reconcile/model.js";
import { createRolloutCoordinator, type RolloutCoordinator } from "../reconcile/rollout.js";
import type { RolloutPolicy } from "../reconcile/rollout-stages.js";
import { type CertificateStatus, earliestRenewal } from "../renewal/manager.js";
import { sourceKind } from "../sources/kinds.js";
import { type BuiltSources, buildSources } from "../sources/registry.js";
import { openFileStore } from "../store/file-store.js";
import { checkStateDir } from "../store/state-dir.js";
import type { StateStore } from "../store/types.js";
import { sharedFleetMemory, storedFleetMemory } from "../targets/haproxy/engine/fleet-memory.js";
import { createWriteQueues } from "../targets/haproxy/engine/writers.js";
import { memberOwns, targetEndpoints } from "../targets/kinds.js";
import { type BuiltTarget, buildTarget, challengeMapNodes, leftStaging } from "../targets/registry.js";
import { type ClusterReader, type ClusterRuntime, openClusterReader, startCluster } from "./cluster.js";
import type { Engine } from "./loop.js";
import { openRequestDesk, type RequestDesk } from "./requests.js";
import { REPLACEMENT_IN_EFFECT } from "./summary.js";

export interface EngineOptions {
	log: Logger;
	/** plan and status: read the state store without its lock, order nothing, write nothing. */
	readOnly: boolean;
	/** false (`sync --once`): endpoints that are backing off are tried anyway; failures still count. */
	backoff?: boolean;
	now?: () => Date;
	random?: () => number;
	metrics?: Metrics;
	/** The daemon (`run`): issuers clear what an earlier run left (stale HTTP-01 tokens), in the background. */
	prepareIssuers?: boolean;
	/**
	 * The daemon, alone (not in a cluster): serve `renew`/`revoke` requests left in `state_dir/requests/`
	 * (daemon/requests.ts); in a cluster they go through etcd instead.
	 */
	serveRequests?: boolean;
}

export interface BuiltEngine extends Engine {
	renewals(): CertificateStatus[];
	/** plan and status in a cluster: the leader, members and owners as etcd holds them now. */
	readCluster?(): Promise<ClusterView>;
}

/**
 * The endpoints a cluster shares out (every member reaches them: the HAProxy nodes), as the targets name them,
 * for sharding and status; a directory target's endpoint is each member's own.
 */
export function sharedEndpoints(config: Config): Array<{ target: string; endpoint: string }> {
	return targetEndpoints(config.targets).flatMap((e) =>
		e.shared ? [{ target: e.target, endpoint: e.endpoint }] : [],
	);
}

export async function buildEngine(config: Config, options: EngineOptions): Promise<BuiltEngine> {
	const now = options.now ?? (() => new Date());
	const stateDir = checkStateDir(config.state_dir);
	if (stateDir.warning) options.log.warn({ state_dir: config.state_dir }, stateDir.warning);
	// The local store always: its lock keeps two processes off one state_dir, and it holds the fleet's memory.
	const store = await openFileStore(config.state_dir, { readOnly: options.readOnly });
	const targets: BuiltTarget[] = [];
	let rollout: RolloutCoordinator | undefined;
	let built: BuiltSources | undefined;
	let cluster: ClusterRuntime | undefined;
	let reader: ClusterReader | undefined;
	try {
		if (config.cluster && options.readOnly) reader = openClusterReader(config.cluster);
		else if (config.cluster) cluster = await startCluster(config.cluster, options.log);
		const warn = (fields: Record<string, unknown>, message: string) => options.log.warn(fields, message);
		built = await buildSources(config.sources, {
			store: shared(store, cluster, reader),
			local: { store, readOnly: options.readOnly, warn },
			clock: now,
			challengeMaps: (names, map) => challengeMapNodes(config.targets, names, map),
		});
		// One writer per HAProxy process, across every target that reaches it.
		const writeQueues = createWriteQueues();
		// Alone, in the state directory; in a cluster, in etcd, shared by the replicas (an endpoint that moves to
		// another replica takes its backoff and pinned duplicates along).
		const sharedMemory = cluster?.memoryStore ?? reader?.store;
		const memory = (target: string) =>
			sharedMemory
				? sharedFleetMemory(target, { store: sharedMemory, readOnly: options.readOnly, warn })
				: storedFleetMemory(target, { store, readOnly: options.readOnly, locate: store.pathOf, warn });
		// Rollout stages are written by whichever member runs a canary: the members' shared store, like the fleet's memory.
		if (config.rollout)
			rollout = createRolloutCoordinator({
				store: sharedMemory ?? store,
				policy: rolloutPolicy(config.rollout),
				readOnly: options.readOnly,
				now,
			});
		// Each certificate's own trust_store, read once (a bad one stops the start, naming the field).
		const certificateStores = new Map(
			config.certificates.flatMap((c, i) =>
				c.trust_store
					? [[c.name, loadTrustStore(c.trust_store, `certificates[${i}].trust_store`)] as const]
					: [],
			),
		);
		for (const t of config.targets)
			targets.push(
				buildTarget(t, {
					now,
					warn,
					readOnly: options.readOnly,
					stateDir: config.state_dir,
					localStore: store,
					haproxy: { writeQueues, memory, ...(options.backoff === false ? { backoff: false } : {}) },
					...(cluster ? { owns: memberOwns(config.targets, cluster.owns) } : {}),
					// A late push from a lagging or deposed replica never replaces a newer certificate.
					...(config.cluster ? { neverDowngrade: true } : {}),
					...(certificateStores.size > 0
						? { certificateTrust: (c: string) => certificateStores.get(c) }
						: {}),
				}),
			);
	} catch (e) {
		await Promise.allSettled([
			built?.close(),
			...targets.map((t) => t.close()),
			cluster?.close(),
			reader?.close(),
		]);
		store.close();
		throw e;
	}
	const { sources, issuers } = built;
	if (options.prepareIssuers && !options.readOnly) {
		// In the background: a node that is down must not hold up the first cycle; orders wait for it anyway.
		for (const issuer of issuers.values()) {
			issuer.prepare?.(AbortSignal.timeout(60_000)).then(
				() => options.log.info({ issuer: issuer.name }, "stale HTTP-01 tokens cleared from the HAProxy maps"),
				(e: unknown) =>
					options.log.warn(
						{ issuer: issuer.name, err: describeError(e) },
						"could not clear stale HTTP-01 tokens from the HAProxy maps; retried before the next order",
					),
			);
		}
	}
	const parts = built;
	let desk: RequestDesk | undefined;
	if (options.serveRequests && !options.readOnly && !config.cluster) {
		try {
			desk = await openRequestDesk({
				stateDir: config.state_dir,
				store,
				issuers,
				certificates: config.certificates.map((c) => c.name),
				...(config.renewal?.max_orders_per_day === undefined
					? {}
					: { maxOrdersPerDay: config.renewal.max_orders_per_day }),
				log: options.log,
				now,
			});
		} catch (e) {
			await Promise.allSettled([built.close(), ...targets.map((t) => t.close())]);
			store.close();
			throw e;
		}
	}
	const countedIssuers = new Set(
		config.sources.filter((s) => sourceKind(s.type)?.countsOrders).map((s) => s.name),
	);
	const load = createDesiredLoader(
		{
			sources,
			replacements: shared(store, cluster, reader),
			renewal: {
				store: shared(store, cluster, reader),
				issuers,
				certificates: config.certificates,
				settings: config.renewal,
				log: options.log,
				...(cluster ? { issueLock: cluster.issueLock } : {}),
			},
			now,
			...(options.random ? { random: options.random } : {}),
		},
		// In a cluster only the leader orders, and only while its lease is valid by its own clock.
		{ order: cluster ? () => cluster.canOrder() : !options.readOnly },
	);
	let statuses: CertificateStatus[] = [];
	const reported = new Set<string>();
	// Deliberate replacements logged (once each: certificate and fingerprint).
	const replacing = new Set<string>();
	const loadDesired = async (signal: AbortSignal): Promise<DesiredSet> => {
		// Nothing is pushed that was not read from etcd under a valid lease: the whole cycle waits instead.
		if (cluster?.blocked()) await cluster.settled(2 * (config.cluster?.etcd.deadline ?? 2000));
		const blocked = cluster?.blocked();
		if (blocked) throw blocked;
		const loaded = await load(signal);
		for (const c of loaded.certificates) {
			const key = `${c.name} ${c.bundle.leaf.fingerprint}`;
			if (!c.replacement || replacing.has(key)) continue;
			replacing.add(key);
			options.log.info(
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
		const unreachable = config.cluster ? clusterUnreachable(loaded.renewal) : undefined;
		if (unreachable) throw unreachable;
		statuses = loaded.renewal;
		// Every cycle (the first at start): staging no configured directory target will ever clean up.
		for (const path of await leftStaging(
			config.targets,
			loaded.certificates.map((c) => c.name),
		)) {
			if (reported.has(path)) continue;
			reported.add(path);
			options.log.warn(
				{ path },
				"staging left by a directory target or certificate no longer configured (may hold private keys): not removed; delete it once nothing writes there",
			);
		}
		return loaded;
	};

	const deps: CycleDeps = { loadDesired, targets, now, ...(rollout ? { rollout } : {}) };
	const watchers: Array<() => void> = [];
	return {
		deps,
		renewals: () => statuses,
		...(cluster ? { cluster: () => cluster.view(sharedEndpoints(config)) } : {}),
		...(reader ? { readCluster: () => reader.view(sharedEndpoints(config)) } : {}),
		nextWake: () => earliest(earliestRenewal(statuses), rollout?.nextWake()),
		...(desk ? { beginCycle: (signal: AbortSignal) => (desk as RequestDesk).begin(signal) } : {}),
		afterCycle() {
			options.metrics?.recordRenewals(statuses.map(renewalView));
			for (const s of statuses) {
				if (s.ordered && countedIssuers.has(s.issuer)) {
					options.metrics?.recordAcmeOrder(s.issuer, s.lastError ? "failure" : "success");
				}
			}
		},
		watch(wake) {
			for (const s of sources) if (s.watch) watchers.push(s.watch(wake));
			if (cluster) watchers.push(cluster.watch(wake));
			if (desk) watchers.push(desk.watch(wake));
		},
		async close() {
			for (const stop of watchers.splice(0)) stop();
			// Every part is closed even when one fails; the store (and its lock) last, once nothing can write.
			const outcomes = await Promise.allSettled([
				parts.close(),
				...targets.map((t) => t.close()),
				cluster?.close(),
				reader?.close(),
			]);
			store.close();
			const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
			if (failed) throw failed.reason;
		},
	};
}

/** The configured rollout as the coordinator takes it (its trust store read now: a bad one stops the start). */
function rolloutPolicy(c: RolloutConfig): RolloutPolicy {
	const trust = c.trust_store ? loadTrustStore(c.trust_store, "rollout.trust_store") : undefined;
	return {
		canary: typeof c.canary === "number" ? { count: c.canary } : { percent: Number.parseFloat(c.canary) },
		verify: c.verify ?? ["serial", "chain", "key-types", ...(trust ? (["trust"] as const) : [])],
		holdMs: c.hold,
		...(trust ? { trust } : {}),
		...(c.targets ? { targets: c.targets } : {}),
		...(c.certificates ? { certificates: c.certificates } : {}),
	};
}

function earliest(a: Date | undefined, b: Date | undefined): Date | undefined {
	if (a === undefined) return b;
	if (b === undefined) return a;
	return a < b ? a : b;
}

/** Where issuers and renewal keep their state: etcd in a cluster (writes fenced on the leadership), else the files. */
function shared(local: StateStore, cluster?: ClusterRuntime, reader?: ClusterReader): StateStore {
	return cluster?.store ?? reader?.store ?? local;
}

/**
 * A certificate whose state etcd did not return: the cycle stops rather than push a desired set that lacks it
 * (a target would then see fewer certificates than there are).
 */
function clusterUnreachable(statuses: readonly CertificateStatus[]): CertificateeError | undefined {
	const failed = statuses.find((s) => s.lastError?.code === "CLUSTER_UNAVAILABLE");
	if (!failed?.lastError) return undefined;
	return new CertificateeError("CLUSTER_UNAVAILABLE", failed.lastError.message, {
		context: { certificate: failed.name },
		...(failed.lastError.hint ? { hint: failed.lastError.hint } : {}),
		retryable: true,
	});
}

function renewalView(s: CertificateStatus): RenewalView {
	return {
		certificate: s.name,
		nextRenewal: new Date(s.nextRenewalAt),
		retryIntervalMs: s.retryIntervalMs,
		breakerOpen: s.breakerOpen,
		forcedRenewals: s.forcedRenewals,
	};
}
