/**
 * Rendezvous (highest random weight) hashing: an id belongs to the member with the highest sha256(member, id).
 * Every member computes the same owner from the same member list, with no coordination; when a member leaves,
 * only its ids move (each to its own runner-up), and a member that joins takes ids only from the others.
 */
import { createHash } from "node:crypto";

function weight(member: string, id: string): bigint {
	// NUL cannot occur in either name, so ("a", "bc") and ("ab", "c") never hash alike.
	return createHash("sha256").update(`${member}\0${id}`).digest().readBigUInt64BE(0);
}

/** The owner of `id` among `members` (any order, duplicates allowed); undefined when there are none. */
export function rendezvousOwner(id: string, members: readonly string[]): string | undefined {
	let best: string | undefined;
	let bestWeight = -1n;
	for (const m of members) {
		const w = weight(m, id);
		// Equal weights (2^-64) go to the smaller name, so the result never depends on the list's order.
		if (w > bestWeight || (w === bestWeight && best !== undefined && m < best)) {
			best = m;
			bestWeight = w;
		}
	}
	return best;
}
