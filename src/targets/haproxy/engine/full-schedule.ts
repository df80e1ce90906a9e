/**
 * When an endpoint observes in full on schedule (`full_observation_every`), for both HAProxy kinds.
 *
 * Each endpoint starts its schedule at its own phase, from its place among the endpoints it is configured with,
 * so a fleet's scheduled full observations are spread over the cycles: with 100 endpoints and every 10, ten
 * observe in full each cycle, instead of all hundred in every tenth cycle, which a renewal landing on it waited
 * for (60 s against 2 s; bench/results/2026-12-06-issue24-profile.md). The first endpoint keeps the phase 0: its
 * first scheduled full observation is the every-th, as without a place.
 *
 * A full observation for another reason (a reload, a changed listing, a failed write) does not move the phase,
 * so a fleet reloaded at once does not fall into step again; it costs at most one extra full observation before
 * the scheduled one.
 *
 * A cycle whose desired set changed (a renewal) defers a due scheduled full observation by one observation, once:
 * the writes go out after an incremental look instead of waiting for every item's GET (the API fleet's renewal
 * cycle paid a tenth of the fleet's full observations on top of its writes). A full observation for a reason
 * (a changed listing, another worker) is never deferred, and the next observation is full whatever the cycle
 * brings, so the schedule slips by at most one.
 */
import { createHash } from "node:crypto";

/** An endpoint's place among those it is configured with: its index and how many there are. */
export interface Place {
	index: number;
	count: number;
}

/** The reason a scheduled full observation gives (`observation: full (every 10)`). */
export const scheduledFull = (every: number): string => `every ${every}`;

/** How many observations the schedule counts as done at the first observation: spread evenly over 0..every-1. */
export function fullPhase(place: Place | undefined, every: number): number {
	if (place === undefined || place.count <= 1 || every <= 1) return 0;
	return Math.floor((place.index * every) / place.count) % every;
}

/**
 * The schedule's count after an observation: its phase after the first, 0 after a scheduled full one, one more
 * after any other (incremental, or full for another reason).
 */
export function sinceFullAfter(
	previous: number | undefined,
	full: string | undefined,
	every: number,
	phase: number,
): number {
	if (previous === undefined) return phase;
	if (full === scheduledFull(every)) return 0;
	return previous + 1;
}

/**
 * Whether this observation is the scheduled full one. `changed`: the cycle's desired set differs from the one
 * the last observation was made for; then an observation that is only just due is deferred (to the next one).
 */
export function fullIsDue(sinceFull: number, every: number, changed = false): boolean {
	if (sinceFull + 1 < every) return false;
	return !(changed && sinceFull + 1 === every && every > 1);
}

/**
 * What an observation's `observation` field says: `full (why)`, `incremental`, or, when a due scheduled full
 * observation was deferred (it was due: `sinceFull` is the count before this observation), that it was.
 */
export function observationKind(
	full: string | undefined,
	sinceFull: number | undefined,
	every: number,
): string {
	if (full !== undefined) return `full (${full})`;
	if (sinceFull !== undefined && fullIsDue(sinceFull, every)) {
		return `incremental (the full one, ${scheduledFull(every)}, deferred: the desired certificates changed)`;
	}
	return "incremental";
}

/** Whether the desired set (desiredKey()) changed since the last observation; unknown on either side is no. */
export const desiredChanged = (last: string | undefined, now: string | undefined): boolean =>
	last !== undefined && now !== undefined && last !== now;

/** A digest of a cycle's desired certificates, by ref and leaf fingerprint: what desiredChanged() compares. */
export function desiredKey(
	desired: ReadonlyArray<{ ref: string; certificate: { bundle: { leaf: { fingerprint: string } } } }>,
): string {
	const hash = createHash("sha256");
	for (const d of [...desired].sort((x, y) => (x.ref < y.ref ? -1 : x.ref > y.ref ? 1 : 0))) {
		hash.update(`${d.ref}\0${d.certificate.bundle.leaf.fingerprint}\n`);
	}
	return hash.digest("base64url");
}
