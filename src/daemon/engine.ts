/**
 * From a configuration to a running engine: the state store, sources and issuers, the renewal manager
 * and the targets, wired into the cycle's dependencies. The only place that knows every part.
 */

import { loadTrustStore, type TrustStore } from "../certificates/trust.js";
import type { Config, RolloutConfig } from "../config/schema.js";
import { describeError } from "../errors.js";
import type { Logger } from "../log.js";
import type { ClusterView } from "../metrics/cluster.js";
import type { Metrics } from "../metrics/index.js";
import type { CycleDeps } from "../reconcile/cycle.js";
import { createRolloutCoordinator, type RolloutCoordinator } from "../reconcile/rollout.js";
import type { RolloutPolicy } from "../reconcile/rollout-stages.js";
import { earliestRenewal } from "../renewal/manager.js";
import type { RenewalStatus } from "../renewal/status.js";
import { sourceKind } from "../sources/kinds.js";
import { type BuiltSources, buildSources } from "../sources/registry.js";
import { type FileStore, openFileStore } from "../store/file-store.js";
import { checkStateDir } from "../store/state-dir.js";
import type { StateStore } from "../store/types.js";
import { sharedFleetMemory, storedFleetMemory } from "../targets/haproxy/engine/fleet-memory.js";
import { createWriteQueues } from "../targets/haproxy/engine/writers.js";
import { memberOwns, targetEndpoints } from "../targets/kinds.js";
import { type BuiltTarget, buildTarget, challengeMapNodes } from "../targets/registry.js";
import { type ClusterReader, type ClusterRuntime, openClusterReader, startCluster } from "./cluster.js";
import { createDesiredLoading } from "./desired-loading.js";
import type { Engine } from "./loop.js";
import { openRequestDesk, type RequestDesk } from "./requests.js";

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
	renewals(): RenewalStatus[];
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
	const parts = await openParts(config, options, store, now);
	const { cluster, reader, rollout, targets, built } = parts;
	if (options.prepareIssuers && !options.readOnly) prepareIssuers(built.issuers, options.log);
	const desk = await openDesk(config, options, parts, now);
	const countedIssuers = new Set(
		config.sources.filter((s) => sourceKind(s.type)?.countsOrders).map((s) => s.name),
	);
	const { loadDesired, statuses } = createDesiredLoading(config, {
		built,
		store: shared(store, cluster, reader),
		cluster,
		readOnly: options.readOnly,
		log: options.log,
		now,
		random: options.random,
	});
	const deps: CycleDeps = { loadDesired, targets, now, ...(rollout ? { rollout } : {}) };
	const watchers: Array<() => void> = [];
	return {
		deps,
		renewals: statuses,
		...(cluster ? { cluster: () => cluster.view(sharedEndpoints(config)) } : {}),
		...(reader ? { readCluster: () => reader.view(sharedEndpoints(config)) } : {}),
		nextWake: () => earliest(earliestRenewal(statuses()), rollout?.nextWake()),
		...(desk ? { beginCycle: (signal: AbortSignal) => desk.begin(signal) } : {}),
		afterCycle() {
			options.metrics?.recordRenewals(statuses());
			for (const s of statuses()) {
				if (s.ordered && countedIssuers.has(s.issuer)) {
					options.metrics?.recordAcmeOrder(s.issuer, s.lastError ? "failure" : "success");
				}
			}
		},
		watch(wake) {
			for (const s of built.sources) if (s.watch) watchers.push(s.watch(wake));
			if (cluster) watchers.push(cluster.watch(wake));
			if (desk) watchers.push(desk.watch(wake));
		},
		async close() {
			for (const stop of watchers.splice(0)) stop();
			const failed = await closeParts(parts);
			if (failed) throw failed.reason;
		},
	};
}

/** What an engine runs on, closed together by closeParts; `built` is missing only while they are opened. */
interface EngineParts {
	store: FileStore;
	targets: BuiltTarget[];
	built?: BuiltSources;
	cluster?: ClusterRuntime;
	reader?: ClusterReader;
	rollout?: RolloutCoordinator;
}

type OpenedParts = EngineParts & { built: BuiltSources };

/** The cluster (or its reader), sources and issuers, rollout and targets; on a failure, what was opened is closed. */
async function openParts(
	config: Config,
	options: EngineOptions,
	store: FileStore,
	now: () => Date,
): Promise<OpenedParts> {
	const parts: EngineParts = { store, targets: [] };
	try {
		if (config.cluster && options.readOnly) parts.reader = openClusterReader(config.cluster);
		else if (config.cluster) parts.cluster = await startCluster(config.cluster, options.log);
		const { cluster, reader } = parts;
		const warn = (fields: Record<string, unknown>, message: string) => options.log.warn(fields, message);
		const built = await buildSources(config.sources, {
			store: shared(store, cluster, reader),
			local: { store, readOnly: options.readOnly, warn },
			clock: now,
			challengeMaps: (names, map) => challengeMapNodes(config.targets, names, map),
		});
		parts.built = built;
		// Alone, in the state directory; in a cluster, in etcd, shared by the replicas (an endpoint that moves to
		// another replica takes its backoff and pinned duplicates along).
		const sharedMemory = cluster?.memoryStore ?? reader?.store;
		// Rollout stages are written by whichever member runs a canary: the members' shared store, like the fleet's memory.
		if (config.rollout)
			parts.rollout = createRolloutCoordinator({
				store: sharedMemory ?? store,
				policy: rolloutPolicy(config.rollout),
				readOnly: options.readOnly,
				now,
			});
		buildTargets(config, options, { store, cluster, sharedMemory, now, warn }, parts.targets);
		return { ...parts, built };
	} catch (e) {
		await closeParts(parts);
		throw e;
	}
}

/** Builds each configured target into `into` (so that those built before a failure are closed with the rest). */
function buildTargets(
	config: Config,
	options: EngineOptions,
	deps: {
		store: FileStore;
		cluster: ClusterRuntime | undefined;
		sharedMemory: StateStore | undefined;
		now: () => Date;
		warn: (fields: Record<string, unknown>, message: string) => void;
	},
	into: BuiltTarget[],
): void {
	const { store, cluster, sharedMemory, now, warn } = deps;
	// One writer per HAProxy process, across every target that reaches it.
	const writeQueues = createWriteQueues();
	const memory = (target: string) =>
		sharedMemory
			? sharedFleetMemory(target, { store: sharedMemory, readOnly: options.readOnly, warn })
			: storedFleetMemory(target, { store, readOnly: options.readOnly, locate: store.pathOf, warn });
	const certificateStores = certificateTrustStores(config);
	for (const t of config.targets) {
		const sameKind = config.targets.filter((o) => o.type === t.type);
		into.push(
			buildTarget(t, {
				place: { index: sameKind.indexOf(t), count: sameKind.length },
				now,
				warn,
				readOnly: options.readOnly,
				stateDir: config.state_dir,
				localStore: store,
				haproxy: { writeQueues, memory, ...(options.backoff === false ? { backoff: false } : {}) },
				...(cluster ? { owns: memberOwns(config.targets, cluster.owns) } : {}),
				// A late push from a lagging or deposed replica never replaces a newer certificate.
				...(config.cluster ? { neverDowngrade: true } : {}),
				...(certificateStores.size > 0 ? { certificateTrust: (c: string) => certificateStores.get(c) } : {}),
			}),
		);
	}
}

/** Each certificate's own trust_store, read once (a bad one stops the start, naming the field). */
function certificateTrustStores(config: Config): Map<string, TrustStore> {
	return new Map(
		config.certificates.flatMap((c, i) =>
			c.trust_store
				? [[c.name, loadTrustStore(c.trust_store, `certificates[${i}].trust_store`)] as const]
				: [],
		),
	);
}

/**
 * Every part is closed even when one fails; the store (and its lock) last, once nothing can write. The first
 * failure (of all but the store), for the caller to judge.
 */
async function closeParts(parts: EngineParts): Promise<PromiseRejectedResult | undefined> {
	const outcomes = await Promise.allSettled([
		parts.built?.close(),
		...parts.targets.map((t) => t.close()),
		parts.cluster?.close(),
		parts.reader?.close(),
	]);
	parts.store.close();
	return outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
}

/** In the background: a node that is down must not hold up the first cycle; orders wait for it anyway. */
function prepareIssuers(issuers: BuiltSources["issuers"], log: Logger): void {
	for (const issuer of issuers.values()) {
		issuer.prepare?.(AbortSignal.timeout(60_000)).then(
			() => log.info({ issuer: issuer.name }, "stale HTTP-01 tokens cleared from the HAProxy maps"),
			(e: unknown) =>
				log.warn(
					{ issuer: issuer.name, err: describeError(e) },
					"could not clear stale HTTP-01 tokens from the HAProxy maps; retried before the next order",
				),
		);
	}
}

/** The desk of `renew`/`revoke` requests in the state directory, for the daemon alone (a cluster uses etcd). */
async function openDesk(
	config: Config,
	options: EngineOptions,
	parts: OpenedParts,
	now: () => Date,
): Promise<RequestDesk | undefined> {
	if (!options.serveRequests || options.readOnly || config.cluster) return undefined;
	try {
		return await openRequestDesk({
			stateDir: config.state_dir,
			store: parts.store,
			issuers: parts.built.issuers,
			certificates: config.certificates.map((c) => c.name),
			...(config.renewal?.max_orders_per_day === undefined
				? {}
				: { maxOrdersPerDay: config.renewal.max_orders_per_day }),
			log: options.log,
			now,
		});
	} catch (e) {
		await closeParts(parts);
		throw e;
	}
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
