/**
 * One key held under the session's lease: created if absent, else watched until it goes, then tried again. The
 * shape of the election (`leader`) and of membership (`members/<member>`). The key's create_revision is the fence
 * of everything done while holding it.
 */
import { EventEmitter } from "node:events";
import { EtcdLeaseInvalidError, type IKeyValue } from "etcd3";
import { describeError } from "../errors.js";
import type { Logger } from "../log.js";
import { clusterUnavailable, type EtcdConnection } from "./etcd.js";
import { startLoop, watchKick } from "./loop.js";
import type { Session } from "./session.js";

export interface Claim {
	/** The key's create_revision while we hold it under the session's current lease and the session is valid. */
	held(): string | undefined;
	/** The key's value as last read, whoever holds it; undefined when absent. */
	holder(): string | undefined;
	/** Called when held() or holder() changes. */
	onChange(cb: () => void): () => void;
	/** Stops trying and deletes the key if it is still ours (same create_revision). */
	close(): Promise<void>;
}

export interface ClaimOptions {
	/** Relative to the prefix. */
	key: string;
	value: string;
	log: Logger;
	/** Re-read this often even without a watch event (safety net), ms. */
	everyMs?: number;
}

/** The first key of a Txn's Else range, or of a plain range response. */
function firstKv(kvs: IKeyValue[] | undefined): IKeyValue | undefined {
	return kvs?.[0];
}

export function startClaim(conn: EtcdConnection, session: Session, options: ClaimOptions): Claim {
	const { key, value, log } = options;
	const events = new EventEmitter();
	let closed = false;
	/** The key as we created it: under which lease, at which revision. */
	let ours: { lease: string; createRevision: string } | undefined;
	/** Leases we held the key under: a key left on one of them (lost, not yet expired) is ours to remove. */
	const pastLeases = new Set<string>();
	let current: string | undefined;
	let last = "";

	const held = () =>
		ours !== undefined && ours.lease === session.leaseId() && session.valid()
			? ours.createRevision
			: undefined;
	const emitIfChanged = () => {
		const now = `${held()}|${current}`;
		if (now === last) return;
		last = now;
		events.emit("change");
	};
	const deleteIfCreated = (createRevision: string) =>
		conn.kv.if(key, "Create", "==", createRevision).then(conn.kv.delete().key(key)).commit();

	async function step(): Promise<void> {
		const lease = session.leaseId();
		let kv: IKeyValue | undefined;
		try {
			if (lease !== undefined) {
				const res = await conn.kv
					.if(key, "Create", "==", 0)
					.then(conn.kv.put(key).value(value).lease(lease))
					.else(conn.kv.get(key))
					.commit();
				if (res.succeeded) {
					ours = { lease, createRevision: res.header.revision };
					pastLeases.add(lease);
					current = value;
					log.info({ etcd_key: key, createRevision: res.header.revision }, "etcd key claimed");
					return emitIfChanged();
				}
				kv = firstKv(res.responses[0]?.response_range.kvs);
			} else {
				kv = firstKv((await conn.kv.get(key).exec()).kvs);
			}
		} catch (e) {
			// etcd no longer knows the lease (revoked, or expired before our deadline noticed): whatever we held
			// under it is gone, so we hold nothing, even before the session learns it.
			if (e instanceof EtcdLeaseInvalidError && ours?.lease === lease) {
				ours = undefined;
				emitIfChanged();
			}
			throw clusterUnavailable(conn.settings, `claim ${key}`, e);
		}
		current = kv?.value.toString();
		if (kv !== undefined && lease !== undefined && kv.lease === lease) {
			ours = { lease, createRevision: kv.create_revision };
		} else {
			ours = undefined;
			if (kv !== undefined && pastLeases.has(kv.lease)) {
				// Left on a lease we lost: nobody can take it until the server expires it, so remove it now.
				log.info({ etcd_key: key }, "etcd key left on a lost lease of ours; deleting it");
				await deleteIfCreated(kv.create_revision).catch((e: unknown) => {
					throw clusterUnavailable(conn.settings, `delete ${key}`, e);
				});
				loop.kick();
			}
		}
		emitIfChanged();
	}

	const loop = startLoop(step, {
		everyMs: options.everyMs ?? 5000,
		onError: (e) => log.warn({ etcd_key: key, err: describeError(e) }, "etcd claim failed; retrying"),
	});
	const watch = watchKick(conn, { key }, loop.kick, log);
	const offSession = session.onChange(() => {
		emitIfChanged();
		loop.kick();
	});
	loop.kick();

	return {
		held,
		holder: () => current,
		onChange(cb) {
			events.on("change", cb);
			return () => events.off("change", cb);
		},
		async close() {
			if (closed) return;
			closed = true;
			offSession();
			await loop.close();
			await watch.close();
			const mine = ours;
			ours = undefined;
			if (mine) {
				await deleteIfCreated(mine.createRevision).catch((e: unknown) => {
					log.warn(
						{ key, err: clusterUnavailable(conn.settings, `delete ${key}`, e).message },
						"etcd key not released",
					);
				});
			}
			events.emit("change");
			events.removeAllListeners();
		},
	};
}
