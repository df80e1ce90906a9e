/**
 * One etcd lease per member process, kept alive by etcd3's Lease. Leadership, membership and issue locks hang
 * their keys on it, so when it ends etcd deletes them all.
 *
 * The session's own deadline decides whether this member may act, never the library: etcd3 reports a lost lease
 * only after 2 x TTL without an answer, while the server expires it after TTL (research §4.3). validUntil is the
 * time the last acknowledged keepalive was SENT (the server renewed the lease no earlier than that) plus the TTL,
 * minus a margin for clock rate differences and the server's expiry tick.
 */
import { EventEmitter } from "node:events";
import type { Lease } from "etcd3";
import { type Logger, pino } from "pino";
import { describeError } from "../errors.js";
import { clusterUnavailable, type EtcdConnection } from "./etcd.js";
import { BACKOFF_MIN_MS, nextBackoff, unrefTimer } from "./loop.js";

export interface Session {
	/** The current lease (decimal string), undefined while none is granted. */
	leaseId(): string | undefined;
	/** Whether this member may act on its lease at `now` (default: the session's clock). */
	valid(now?: number): boolean;
	/** Epoch ms up to which the lease is surely alive on the server; 0 without a lease. */
	validUntil(): number;
	/** Called when the lease changes (lost, granted) and when validity turns false or true. */
	onChange(cb: () => void): () => void;
	/** Stops the keepalives and revokes the lease, so every key on it goes at once. */
	close(): Promise<void>;
}

export interface SessionOptions {
	/** The lease TTL, seconds (>= 2). */
	ttlSeconds: number;
	/** Epoch ms; injectable for tests. Default Date.now. */
	clock?: () => number;
	log?: Logger;
}

/** What is taken off the TTL: max(1 s, TTL / 5). */
export function sessionMarginMs(ttlSeconds: number): number {
	return Math.max(1000, (ttlSeconds * 1000) / 5);
}

export const silentLog: Logger = pino({ enabled: false });

export function startSession(conn: EtcdConnection, options: SessionOptions): Session {
	const clock = options.clock ?? Date.now;
	const log = options.log ?? silentLog;
	const ttlMs = options.ttlSeconds * 1000;
	const marginMs = sessionMarginMs(options.ttlSeconds);
	const events = new EventEmitter();
	let closed = false;
	let lease: Lease | undefined;
	let id: string | undefined;
	let until = 0;
	/** Send times of the keepalives not yet answered on the current stream, oldest first. */
	let sent: number[] = [];
	let lastValid = false;
	let expiry: NodeJS.Timeout | undefined;
	let retry: NodeJS.Timeout | undefined;
	let wake: (() => void) | undefined;

	const valid = (now = clock()) => !closed && id !== undefined && now < until;
	/** Emits a change when validity flipped, and arms a timer for the moment it will flip by itself. */
	const update = (force: boolean) => {
		clearTimeout(expiry);
		const now = valid();
		if (now) expiry = unrefTimer(() => update(false), Math.max(0, until - clock()) + 1);
		if (force || now !== lastValid) {
			lastValid = now;
			events.emit("change");
		}
	};

	function watchLease(l: Lease): void {
		l.on("keepaliveEstablished", () => {
			if (l === lease) sent = [];
		});
		l.on("keepaliveFired", () => {
			if (l === lease) sent.push(clock());
		});
		l.on("keepaliveSucceeded", () => {
			if (l !== lease) return;
			const at = sent.shift();
			// An answer with no send on record (cannot happen in 1.1.2) renews nothing.
			if (at === undefined) return;
			until = Math.max(until, at + ttlMs - marginMs);
			update(false);
		});
		// Typed as a response in 1.1.2, emitted with the error.
		l.on("keepaliveFailed", (e: unknown) => {
			if (l !== lease) return;
			sent = [];
			log.debug({ lease: id, err: describeError(e) }, "etcd lease keepalive failed; the library reconnects");
		});
		// etcd3 may report one loss several times (keepalive, a put under the lease, the grant): renew once.
		let lost = false;
		l.on("lost", (e: Error) => {
			if (lost || l !== lease || id === undefined) return;
			lost = true;
			log.warn({ lease: id, err: e.message }, "etcd lease lost; granting a new one");
			lease = undefined;
			id = undefined;
			until = 0;
			sent = [];
			update(true);
			void grant();
		});
	}

	async function grant(): Promise<void> {
		let backoff = BACKOFF_MIN_MS;
		while (!closed) {
			const at = clock();
			const l = conn.client.lease(options.ttlSeconds);
			lease = l;
			watchLease(l);
			try {
				const granted = await l.grant();
				if (closed) {
					await l.revoke().catch(() => undefined);
					return;
				}
				id = granted;
				until = at + ttlMs - marginMs;
				log.info({ lease: id, ttl: options.ttlSeconds }, "etcd lease granted");
				update(true);
				return;
			} catch (e) {
				if (lease === l) lease = undefined;
				l.release();
				log.warn(
					{ err: clusterUnavailable(conn.settings, "lease grant", e).message },
					"etcd lease not granted",
				);
				await new Promise<void>((resolve) => {
					wake = resolve;
					retry = unrefTimer(resolve, backoff);
				});
				backoff = nextBackoff(backoff);
			}
		}
	}

	void grant();
	return {
		leaseId: () => id,
		valid,
		validUntil: () => (id === undefined ? 0 : until),
		onChange(cb) {
			events.on("change", cb);
			return () => events.off("change", cb);
		},
		async close() {
			if (closed) return;
			closed = true;
			clearTimeout(expiry);
			clearTimeout(retry);
			wake?.();
			const l = lease;
			lease = undefined;
			id = undefined;
			until = 0;
			if (l) {
				await l.revoke().catch((e: unknown) => {
					log.warn(
						{ err: clusterUnavailable(conn.settings, "lease revoke", e).message },
						"etcd lease not revoked",
					);
				});
			}
			events.emit("change");
			events.removeAllListeners();
		},
	};
}
