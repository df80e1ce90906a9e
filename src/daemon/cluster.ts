/**
 * A replica's part in a cluster (docs/cluster.md): the etcd connection, the etcd state store, this member's
 * session (one lease), the leadership and, with `shard_endpoints`, the membership; as the few answers the engine
 * needs: may this replica order (leader), may it push at all (its lease is valid), which endpoints are its own,
 * and what to show of the cluster. `plan` and `status` open it read-only: no lease, no campaign, no writes.
 */
import { loadEncryptionKey } from "../cluster/encryption.js";
import type { EtcdConnection } from "../cluster/etcd.js";
import { connectEtcd } from "../cluster/etcd.js";
import { createEtcdStore } from "../cluster/etcd-store.js";
import { tryIssueLock } from "../cluster/issue-lock.js";
import { startLeadership } from "../cluster/leadership.js";
import { type Membership, startMembership } from "../cluster/membership.js";
import { rendezvousOwner } from "../cluster/rendezvous.js";
import { type ClusterConfig, etcdSettings } from "../cluster/schema.js";
import { startSession } from "../cluster/session.js";
import { CertificateeError } from "../errors.js";
import type { Logger } from "../log.js";
import type { ClusterView } from "../metrics/cluster.js";
import type { IssueLock } from "../renewal/manager.js";
import type { StateStore } from "../store/types.js";

export interface ClusterRuntime {
	/** Reads and watches; writes fenced on the leadership (only the leader orders and stores certificates). */
	store: StateStore;
	/** Where fleets keep their endpoints' backoff and pinned duplicates: with sharding, writes fenced on this
	 * member's key (a member that lost its shard writes nothing); without, shared by compare-and-swap. */
	memoryStore: StateStore;
	member: string;
	/** This replica leads and its lease is still valid by its own clock: it may order. */
	canOrder(): boolean;
	/** Why this replica may not push now (no valid lease: etcd unreachable or the lease lost); undefined: it may. */
	blocked(): CertificateeError | undefined;
	/** Resolves once the session holds a valid lease, or after `ms` (a fresh start, before its first cycle). */
	settled(ms: number): Promise<void>;
	issueLock(certificate: string): Promise<IssueLock | undefined>;
	/**
	 * Whether this replica pushes the endpoint now: with shard_endpoints, its owner by rendezvous over the live
	 * members; without, the leader pushes every endpoint. Never two members at once on purpose: HAProxy has one
	 * certificate transaction per process, and two writers in it abort or even cross each other's writes.
	 */
	owns(target: string, endpoint: string): boolean;
	/** Wakes the loop when a certificate, renewal request or deliberate replacement changes in etcd, or leadership or members change. */
	watch(wake: () => void): () => void;
	view(endpoints: ReadonlyArray<{ target: string; endpoint: string }>): ClusterView;
	close(): Promise<void>;
}

export function endpointId(target: string, endpoint: string): string {
	return `${target}/${endpoint}`;
}

/** The daemon's (and `sync`'s) side of the cluster: a session, a campaign, and membership when sharding. */
export async function startCluster(config: ClusterConfig, log: Logger): Promise<ClusterRuntime> {
	const encryptionKey = loadEncryptionKey(config.encryption_key_file, process.env);
	const conn = connectEtcd(etcdSettings(config));
	const store = createEtcdStore(conn, { encryptionKey });
	const member = config.member;
	const ttlSeconds = Math.round(config.lease_ttl / 1000);
	const session = startSession(conn, { ttlSeconds, log });
	const leadership = startLeadership(conn, session, { member, log });
	const membership = config.shard_endpoints ? startMembership(conn, session, { member, log }) : undefined;
	const leaderStore = store.fenced(() => leadership.fence());
	return {
		store: leaderStore,
		memoryStore: membership ? store.fenced(() => membership.fence()) : store,
		member,
		canOrder: () => leadership.isLeader(),
		blocked: () =>
			session.valid()
				? undefined
				: new CertificateeError(
						"CLUSTER_UNAVAILABLE",
						`member ${member} holds no valid lease in etcd at ${config.etcd.endpoints.join(", ")}: nothing is pushed until it does`,
						{
							context: { endpoint: config.etcd.endpoints.join(",") },
							hint: "check that etcd is up and reachable from this host (etcdctl endpoint health); the replica retries on its own",
							retryable: true,
						},
					),
		settled: (ms) =>
			new Promise<void>((resolve) => {
				if (session.valid()) return resolve();
				const done = () => {
					clearTimeout(timer);
					stop();
					resolve();
				};
				const timer = setTimeout(done, ms);
				const stop = session.onChange(() => {
					if (session.valid()) done();
				});
			}),
		issueLock: (certificate) => tryIssueLock(conn, session, certificate, leadership.fence(), { member, log }),
		owns: membership
			? (target, endpoint) => session.valid() && membership.owns(endpointId(target, endpoint))
			: () => leadership.isLeader(),
		watch(wake) {
			const stops = [
				store.watch("certificates/", wake),
				store.watch("renewal/", wake),
				store.watch("replacements/", wake),
				leadership.onChange(wake),
				session.onChange(wake),
				...(membership ? [membership.onChange(wake)] : []),
			];
			return () => {
				for (const stop of stops) stop();
			};
		},
		view: (endpoints) => ({
			member,
			...(leadership.leader() ? { leader: leadership.leader() as string } : {}),
			isLeader: leadership.isLeader(),
			members: membership?.members() ?? [],
			leaseRemainingSeconds: Math.max(0, (session.validUntil() - Date.now()) / 1000),
			watchLagSeconds: store.watchLagSeconds(),
			fencedWrites: store.fencedWrites(),
			shardEndpoints: config.shard_endpoints,
			...(membership
				? {
						owners: endpoints.map((e) => ({
							...e,
							...ownerField(membership, e.target, e.endpoint),
						})),
					}
				: {}),
		}),
		async close() {
			// Resign first, so another member leads at once instead of after the TTL.
			await Promise.allSettled([leadership.close(), membership?.close()]);
			await session.close().catch(() => undefined);
			await store.close();
			conn.close();
		},
	};
}

function ownerField(membership: Membership, target: string, endpoint: string) {
	const owner = membership.owner(endpointId(target, endpoint));
	return owner === undefined ? {} : { owner };
}

/** `plan` and `status`: the etcd store to read, and a look at the leader and members; no lease, no writes. */
export interface ClusterReader {
	store: StateStore;
	member: string;
	view(endpoints: ReadonlyArray<{ target: string; endpoint: string }>): Promise<ClusterView>;
	close(): Promise<void>;
}

export function openClusterReader(config: ClusterConfig): ClusterReader {
	const encryptionKey = loadEncryptionKey(config.encryption_key_file, process.env);
	const conn = connectEtcd(etcdSettings(config));
	const store = createEtcdStore(conn, { encryptionKey });
	const member = config.member;
	return {
		store,
		member,
		view: (endpoints) => readView(conn, config, member, endpoints),
		async close() {
			await store.close();
			conn.close();
		},
	};
}

async function readView(
	conn: EtcdConnection,
	config: ClusterConfig,
	member: string,
	endpoints: ReadonlyArray<{ target: string; endpoint: string }>,
): Promise<ClusterView> {
	const leader = (await conn.kv.get("leader").string()) ?? undefined;
	const keys = await conn.kv.getAll().prefix("members/").keys();
	const live = keys.map((k) => k.slice("members/".length)).sort();
	return {
		member,
		...(leader ? { leader } : {}),
		isLeader: false,
		members: live,
		leaseRemainingSeconds: 0,
		watchLagSeconds: 0,
		fencedWrites: 0,
		shardEndpoints: config.shard_endpoints,
		...(config.shard_endpoints
			? {
					owners: endpoints.map((e) => {
						const owner = rendezvousOwner(endpointId(e.target, e.endpoint), live);
						return { ...e, ...(owner === undefined ? {} : { owner }) };
					}),
				}
			: {}),
	};
}
