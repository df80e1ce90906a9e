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
 */

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

/** Whether this observation is the scheduled full one. */
export const fullIsDue = (sinceFull: number, every: number): boolean => sinceFull + 1 >= every;
