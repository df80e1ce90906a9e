/**
 * Which failures to log: each once when it starts or its code changes, a reminder at most every `remindEveryMs`
 * while it persists (with the message first seen: later ones may only say "skipped, backing off"), and once when
 * it is resolved — never every cycle. Pure: the memory goes in and comes out.
 */
import type { Failure } from "../reconcile/failures.js";

export const REMIND_EVERY_MS = 60 * 60_000;

export interface TrackedFailure {
	failure: Failure;
	/** When it was first seen (ms since the epoch). */
	since: number;
	/** When it was last logged. */
	loggedAt: number;
}

export type FailureMemory = ReadonlyMap<string, TrackedFailure>;

export type FailureEvent =
	| { event: "started" | "changed"; failure: Failure }
	| { event: "reminder"; failure: Failure; sinceMs: number }
	| { event: "resolved"; failure: Failure; afterMs: number };

export function trackFailures(
	memory: FailureMemory,
	failures: readonly Failure[],
	now: number,
	remindEveryMs = REMIND_EVERY_MS,
): { memory: Map<string, TrackedFailure>; events: FailureEvent[] } {
	const next = new Map<string, TrackedFailure>();
	const events: FailureEvent[] = [];
	for (const failure of failures) {
		if (next.has(failure.key)) continue;
		const known = memory.get(failure.key);
		if (known === undefined) {
			next.set(failure.key, { failure, since: now, loggedAt: now });
			events.push({ event: "started", failure });
		} else if (known.failure.code !== failure.code) {
			// A change of code is a change of state; a message that only varies (counts, backoff) is not.
			next.set(failure.key, { failure, since: known.since, loggedAt: now });
			events.push({ event: "changed", failure });
		} else if (now - known.loggedAt >= remindEveryMs) {
			events.push({ event: "reminder", failure: known.failure, sinceMs: now - known.since });
			next.set(failure.key, { ...known, loggedAt: now });
		} else next.set(failure.key, known);
	}
	for (const [key, known] of memory) {
		if (!next.has(key))
			events.push({ event: "resolved", failure: known.failure, afterMs: now - known.since });
	}
	return { memory: next, events };
}

/** The log line of an event: its fields (never key material: messages are scrubbed errors) and message. */
export function failureLogLine(e: FailureEvent): {
	level: "warn" | "info";
	fields: Record<string, unknown>;
	message: string;
} {
	const { kind, subject, target, endpoint, certificate, code, message, hint } = e.failure;
	const fields: Record<string, unknown> = {
		kind,
		subject,
		...(target ? { target } : {}),
		...(endpoint ? { endpoint } : {}),
		...(certificate ? { certificate } : {}),
		code,
		...(hint ? { hint } : {}),
	};
	switch (e.event) {
		case "started":
			return { level: "warn", fields, message: `${kind} failed: ${message}` };
		case "changed":
			return { level: "warn", fields, message: `${kind} still failing, now: ${message}` };
		case "reminder":
			return {
				level: "warn",
				fields: { ...fields, sinceSeconds: Math.round(e.sinceMs / 1000) },
				message: `${kind} still failing: ${message}`,
			};
		case "resolved":
			return {
				level: "info",
				fields: { ...fields, afterSeconds: Math.round(e.afterMs / 1000) },
				message: `${kind} recovered: ${subject}`,
			};
	}
}
