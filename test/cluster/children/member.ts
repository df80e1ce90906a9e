/**
 * Child process: one cluster member (connection, session, leadership) for tests that SIGSTOP a leader.
 * argv: endpoints (comma-separated) prefix member ttlSeconds [membership]: with "membership", it also registers
 * under members/ (and prints the members it sees).
 * Prints a JSON line whenever {leader, validUntil, lease, fence} changes (checked every 20 ms). Once deposed, it
 * keeps trying a write fenced with the last fence it held, as a write already under way would, and prints each
 * result: {"write": true|false}.
 */
import { connectEtcd } from "../../../src/cluster/etcd.js";
import { startLeadership } from "../../../src/cluster/leadership.js";
import { startMembership } from "../../../src/cluster/membership.js";
import { startSession } from "../../../src/cluster/session.js";

const [endpoints, prefix, member, ttl, extra] = process.argv.slice(2) as [
	string,
	string,
	string,
	string,
	string?,
];
const conn = connectEtcd({ endpoints: endpoints.split(","), prefix, deadline_ms: 1000 });
const session = startSession(conn, { ttlSeconds: Number(ttl) });
const leadership = startLeadership(conn, session, { member });
const membership = extra === "membership" ? startMembership(conn, session, { member }) : undefined;

let last = "";
let heldFence: string | undefined;
let writing = false;
setInterval(() => {
	const fence = leadership.fence()?.createRevision;
	const state = {
		leader: leadership.isLeader(),
		validUntil: session.validUntil(),
		lease: session.leaseId(),
		fence,
		leaderName: leadership.leader(),
		members: membership?.members(),
	};
	const line = JSON.stringify(state);
	if (line !== last) {
		last = line;
		process.stdout.write(`${JSON.stringify({ t: Date.now(), ...state })}\n`);
	}
	if (fence !== undefined) heldFence = fence;
	else if (heldFence !== undefined && !writing) {
		writing = true;
		conn.kv
			.if("leader", "Create", "==", heldFence)
			.then(conn.kv.put("state/written-by").value(member))
			.commit()
			.then((r) => process.stdout.write(`${JSON.stringify({ t: Date.now(), write: r.succeeded })}\n`))
			.catch((e: Error) =>
				process.stdout.write(`${JSON.stringify({ t: Date.now(), writeError: e.message })}\n`),
			)
			.finally(() => {
				writing = false;
			});
	}
}, 20);
