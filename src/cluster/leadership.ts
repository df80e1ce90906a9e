/**
 * Election on one key, `leader`: created if absent under the session's lease (value: the member name), else
 * watched and tried again when it goes. A member leads iff it created the key under its CURRENT lease and its
 * session is valid (our own deadline, not the library's late "lost"): isLeader() turns false the moment the
 * session's deadline passes, before the server expires the lease and someone else is elected.
 */
import type { Logger } from "../log.js";
import { startClaim } from "./claim.js";
import type { EtcdConnection } from "./etcd.js";
import type { Fence } from "./fence.js";
import { type Session, silentLog } from "./session.js";

export const LEADER_KEY = "leader";

export interface Leadership {
	isLeader(): boolean;
	/** {key: "leader", createRevision} while leader: every leader write compares it. */
	fence(): Fence | undefined;
	/** The last known leader's member name (ourselves included); undefined when none is known. */
	leader(): string | undefined;
	/** Called when isLeader() or leader() changes. */
	onChange(cb: () => void): () => void;
	/** Resigns: deletes `leader` if it is still ours (same create_revision). The session stays open. */
	close(): Promise<void>;
}

export function startLeadership(
	conn: EtcdConnection,
	session: Session,
	options: { member: string; log?: Logger },
): Leadership {
	const claim = startClaim(conn, session, {
		key: LEADER_KEY,
		value: options.member,
		log: options.log ?? silentLog,
	});
	const fence = (): Fence | undefined => {
		const createRevision = claim.held();
		return createRevision === undefined ? undefined : { key: LEADER_KEY, createRevision };
	};
	return {
		isLeader: () => claim.held() !== undefined,
		fence,
		leader: claim.holder,
		onChange: claim.onChange,
		close: claim.close,
	};
}
