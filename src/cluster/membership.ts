/**
 * Live members: each member holds `members/<member>` under its session lease (value: who and where, as JSON) and
 * watches `members/` for the others. A member whose lease ends drops out of every list within one TTL, and the
 * endpoints it owned (rendezvous hashing over the live list) move to the others.
 */
import { EventEmitter } from "node:events";
import { hostname } from "node:os";
import { describeError } from "../errors.js";
import type { Logger } from "../log.js";
import { startClaim } from "./claim.js";
import { clusterUnavailable, type EtcdConnection } from "./etcd.js";
import type { Fence } from "./fence.js";
import { startLoop, watchKick } from "./loop.js";
import { rendezvousOwner } from "./rendezvous.js";
import { type Session, silentLog } from "./session.js";

export const MEMBERS_PREFIX = "members/";

export interface Membership {
	/** Live members' names, sorted (ourselves included once registered). */
	members(): string[];
	/** Who owns `id` (e.g. an endpoint) among the live members. */
	owner(id: string): string | undefined;
	/** Whether this member owns `id` and may act on it now (registered, session valid). */
	owns(id: string): boolean;
	/** {key: "members/<member>", createRevision} while registered and the session is valid. */
	fence(): Fence | undefined;
	/** Called when members() or fence() changes. */
	onChange(cb: () => void): () => void;
	/** Stops watching and deletes our key if it is still ours. The session stays open. */
	close(): Promise<void>;
}

export function startMembership(
	conn: EtcdConnection,
	session: Session,
	options: { member: string; log?: Logger },
): Membership {
	const { member } = options;
	const log = options.log ?? silentLog;
	const key = `${MEMBERS_PREFIX}${member}`;
	const events = new EventEmitter();
	const value = JSON.stringify({
		member,
		pid: process.pid,
		host: hostname(),
		startedAt: new Date().toISOString(),
	});
	const claim = startClaim(conn, session, { key, value, log });
	let live: string[] = [];

	const list = startLoop(
		async () => {
			let keys: string[];
			try {
				keys = await conn.kv.getAll().prefix(MEMBERS_PREFIX).keys();
			} catch (e) {
				throw clusterUnavailable(conn.settings, `list ${MEMBERS_PREFIX}`, e);
			}
			const next = keys.map((k) => k.slice(MEMBERS_PREFIX.length)).sort();
			if (next.join("\n") === live.join("\n")) return;
			live = next;
			log.info({ members: live }, "cluster members changed");
			events.emit("change");
		},
		{
			everyMs: 5000,
			onError: (e) => log.warn({ err: describeError(e) }, "etcd members list failed; retrying"),
		},
	);
	const watch = watchKick(conn, { prefix: MEMBERS_PREFIX }, list.kick, log);
	const offClaim = claim.onChange(() => events.emit("change"));
	list.kick();

	const fence = (): Fence | undefined => {
		const createRevision = claim.held();
		return createRevision === undefined ? undefined : { key, createRevision };
	};
	const owner = (id: string) => rendezvousOwner(id, live);
	return {
		members: () => [...live],
		owner,
		owns: (id) => fence() !== undefined && owner(id) === member,
		fence,
		onChange(cb) {
			events.on("change", cb);
			return () => events.off("change", cb);
		},
		async close() {
			offClaim();
			await Promise.all([list.close(), watch.close(), claim.close()]);
			events.removeAllListeners();
		},
	};
}
