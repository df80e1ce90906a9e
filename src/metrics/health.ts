/**
 * What /healthz and /readyz answer, decided from the loop's state. Pure: time is passed in.
 *   alive = a cycle finished within 3 × interval, or one is running and younger than its timeout;
 *   ready = the configuration is loaded, the latest cycle ran, and it observed at least one endpoint of each target.
 */
import { absentCertificates, endpointState } from "../reconcile/convergence.js";
import { cycleOutcome } from "../reconcile/outcome.js";
import type { CycleReport } from "../reconcile/report.js";

export interface LoopHealth {
	intervalMs: number;
	/** When the daemon started (ms since the epoch). */
	startedAt: number;
	configLoaded: boolean;
	/** When the running configuration was loaded (start, or a SIGHUP that was taken), ms since the epoch. */
	configLoadedAt?: number;
	/** The last SIGHUP's configuration was rejected (the old one runs on): when, and why. */
	configRejected?: { at: number; error: string };
	/** Start of the cycle running now; undefined between cycles. */
	cycleRunningSince?: number;
	lastFinishedAt?: number;
	last?: CycleReport;
	/** Why the latest cycle could not run at all (etcd unreachable, ...); cleared by the next cycle that runs. */
	lastCycleError?: string;
}

/** How long a cycle may run before the loop counts as stuck. */
export function cycleTimeoutMs(intervalMs: number): number {
	return Math.max(3 * intervalMs, 5 * 60_000);
}

export function liveness(h: LoopHealth, now: number): { ok: boolean; reason: string } {
	const timeout = cycleTimeoutMs(h.intervalMs);
	if (h.cycleRunningSince !== undefined) {
		const age = now - h.cycleRunningSince;
		return age <= timeout
			? { ok: true, reason: `a cycle is running (${Math.round(age / 1000)}s)` }
			: {
					ok: false,
					reason: `a cycle has been running for ${Math.round(age / 1000)}s (timeout ${timeout / 1000}s)`,
				};
	}
	const since = h.lastFinishedAt ?? h.startedAt;
	const age = now - since;
	const limit = h.lastFinishedAt === undefined ? timeout : 3 * h.intervalMs;
	return age <= limit
		? {
				ok: true,
				reason:
					h.lastFinishedAt === undefined ? "starting" : `last cycle finished ${Math.round(age / 1000)}s ago`,
			}
		: { ok: false, reason: `no cycle finished for ${Math.round(age / 1000)}s (limit ${limit / 1000}s)` };
}

export interface Readiness {
	ready: boolean;
	reason: string;
	lastCycle: string | null;
	/** Targets none of whose endpoints the last cycle observed. */
	unobservedTargets: string[];
	/** Endpoints that were not observed or had a failure in the last cycle. */
	failedEndpoints: Array<{ target: string; endpoint: string; error: string }>;
	/** The last SIGHUP's configuration was rejected: still ready (the old one runs), but said here and in `reason`. */
	configRejected?: { at: string; error: string };
}

export function readiness(h: LoopHealth): Readiness {
	const last = h.last;
	const outcome = last ? cycleOutcome(last) : undefined;
	const failedEndpoints = (last?.targets ?? []).flatMap((t) =>
		t.endpoints.flatMap((e) => {
			const s = endpointState(e, last ? absentCertificates(last, e.target) : []);
			return s.state === "failed" || s.state === "unobserved"
				? [{ target: e.target, endpoint: e.endpoint, error: s.reason }]
				: [];
		}),
	);
	const unobservedTargets = outcome?.unobservedTargets ?? [];
	const rejected = h.configRejected && {
		at: new Date(h.configRejected.at).toISOString(),
		error: h.configRejected.error,
	};
	const base = {
		lastCycle: last?.startedAt ?? null,
		unobservedTargets,
		failedEndpoints,
		...(rejected ? { configRejected: rejected } : {}),
	};
	if (!h.configLoaded) return { ready: false, reason: "configuration not loaded", ...base };
	if (h.lastCycleError !== undefined)
		return { ready: false, reason: `the last cycle failed: ${h.lastCycleError}`, ...base };
	if (!last) return { ready: false, reason: "no cycle finished yet", ...base };
	if (unobservedTargets.length > 0) {
		return {
			ready: false,
			reason: `no endpoint observed in target(s) ${unobservedTargets.join(", ")}`,
			...base,
		};
	}
	const note = rejected
		? `; the configuration file was rejected on SIGHUP at ${rejected.at} (the previous one runs): ${rejected.error}`
		: "";
	return { ready: true, reason: `every target observed${note}`, ...base };
}
