/**
 * Issue-once: before ordering a certificate, a member takes `locks/<certificate>` under its session lease
 * (create-if-absent, in the same Txn as the leader fence when one is given), re-reads the store, and only then
 * orders. The lock goes with the lease, so a member that dies mid-order frees it within one TTL.
 */
import { hostname } from "node:os";
import { CertificateeError, describeError } from "../errors.js";
import type { Logger } from "../log.js";
import { clusterUnavailable, type EtcdConnection } from "./etcd.js";
import type { Fence } from "./fence.js";
import { BACKOFF_MIN_MS, nextBackoff, unrefTimer } from "./loop.js";
import { type Session, silentLog } from "./session.js";

export const LOCKS_PREFIX = "locks/";

export interface IssueLock {
	/**
	 * Deletes the lock if it is still ours (same create_revision). When etcd cannot be reached it rejects with
	 * CLUSTER_UNAVAILABLE and keeps trying in the background while the lease lasts.
	 */
	release(): Promise<void>;
}

export interface IssueLockOptions {
	/** The lock's value: who holds it. Default hostname-pid (as cluster.member). */
	member?: string;
	log?: Logger;
}

/**
 * The lock on `name`, or undefined when someone holds it (this process included: one holder at a time).
 * Rejects with CLUSTER_FENCED when `fence` is given and no longer current (we do not lead), and with
 * CLUSTER_UNAVAILABLE when the session has no valid lease or etcd fails.
 */
export async function tryIssueLock(
	conn: EtcdConnection,
	session: Session,
	name: string,
	fence?: Fence,
	options: IssueLockOptions = {},
): Promise<IssueLock | undefined> {
	const key = `${LOCKS_PREFIX}${name}`;
	const log = options.log ?? silentLog;
	const lease = session.leaseId();
	if (lease === undefined || !session.valid()) {
		throw new CertificateeError("CLUSTER_UNAVAILABLE", `no valid etcd session to lock ${name} under`, {
			context: { certificate: name, operation: "issue lock" },
			hint: "the lease is being renewed or etcd is unreachable; the next cycle tries again",
			retryable: true,
		});
	}
	let txn = conn.kv.if(key, "Create", "==", 0);
	if (fence) txn = txn.and(fence.key, "Create", "==", fence.createRevision);
	let res: Awaited<ReturnType<typeof txn.commit>>;
	try {
		res = await txn
			.then(
				conn.kv
					.put(key)
					.value(options.member ?? `${hostname()}-${process.pid}`)
					.lease(lease),
			)
			.else(conn.kv.get(fence?.key ?? key))
			.commit();
	} catch (e) {
		throw clusterUnavailable(conn.settings, `lock ${key}`, e);
	}
	if (!res.succeeded) {
		const fenceKv = fence ? res.responses[0]?.response_range.kvs[0] : undefined;
		if (fence && fenceKv?.create_revision !== fence.createRevision) {
			throw new CertificateeError("CLUSTER_FENCED", `not locking ${name}: ${fence.key} is no longer ours`, {
				context: { certificate: name, operation: "issue lock" },
				hint: "another member leads now and orders this certificate",
			});
		}
		return undefined;
	}
	const createRevision = res.header.revision;
	const remove = () =>
		conn.kv.if(key, "Create", "==", createRevision).then(conn.kv.delete().key(key)).commit();
	const retry = (backoff: number) =>
		unrefTimer(() => {
			if (session.leaseId() !== lease) return; // the lock went with the lease
			remove().then(
				() => log.info({ certificate: name }, "issue lock released"),
				(e: unknown) => {
					log.debug({ certificate: name, err: describeError(e) }, "issue lock still not released");
					retry(nextBackoff(backoff));
				},
			);
		}, backoff);
	return {
		async release() {
			try {
				await remove();
			} catch (e) {
				retry(BACKOFF_MIN_MS);
				throw clusterUnavailable(conn.settings, `unlock ${key}`, e);
			}
		},
	};
}
