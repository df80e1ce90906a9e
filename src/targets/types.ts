/**
 * The target plugin: a kind's factory turns its parsed config into a BuiltTarget, which is all the cycle
 * and the engine ever see of it. Every kind has the same shape (observe → classify → plan → apply per
 * endpoint, reported as a TargetReport) whatever it writes to.
 */
import type { TrustStore } from "../certificates/trust.js";
import type { TargetConfig } from "../config/schema.js";
import type { TargetRunner } from "../reconcile/cycle.js";
import type { StateStore } from "../store/types.js";
import type { HaproxyDeps } from "./haproxy/engine/deps.js";

/** What the engine gives every target kind's factory (the HAProxy kinds' own needs under `haproxy`). */
export interface TargetDeps {
	now: () => Date;
	/** Warnings a driver must not hide (insecure TLS, a reload an endpoint caused). */
	warn?: (fields: Record<string, unknown>, message: string) => void;
	/** plan and status: drivers leave the disk as they find it (no leftover cleanup). */
	readOnly?: boolean;
	/** What only the HAProxy kinds use: shared write queues, fleet memory, backoff (targets/haproxy/engine/deps.ts). */
	haproxy?: HaproxyDeps;
	/**
	 * This target's place among the targets of its kind, to spread periodic work over cycles (a haproxy-runtime
	 * node's scheduled full observations: targets/haproxy/engine/full-schedule.ts). Absent: the first place.
	 */
	place?: { index: number; count: number };
	/** The state directory, for what a target must remember across restarts (failed on_change hooks). */
	stateDir?: string;
	/** The local state store (state_dir's, also in a cluster): what a target remembers of this host (pending on_change runs). */
	localStore?: StateStore;
	/**
	 * A cluster sharding endpoints (docs/cluster.md): whether this replica pushes the endpoint now. Asked each
	 * cycle, as members come and go; endpoints it does not own are left out of its cycle. Absent: all.
	 */
	owns?: (target: string, endpoint: string) => boolean;
	/**
	 * Never replace a live certificate that expires later than the one to push (UPDATE_WOULD_DOWNGRADE,
	 * reconcile/downgrade.ts). Default false: a single process may roll back on purpose; the engine sets it
	 * in cluster mode, where a lagging or deposed member could push an older certificate.
	 */
	neverDowngrade?: boolean;
	/** A certificate's own `trust_store` (certificates[]), read once by the engine: checked as well as the target's. */
	certificateTrust?: (certificate: string) => TrustStore | undefined;
}

/**
 * A configured target, ready for the cycle: `name`, `kind` and `run` (one cycle over its endpoints, never
 * throwing for an endpoint's failure: it is in the report), plus close() for the connections it holds.
 */
export interface BuiltTarget extends TargetRunner {
	close(): Promise<void>;
}

/** One per kind, in src/targets/<kind>/index.ts, registered by one line in src/targets/registry.ts. */
export type TargetFactory<K extends TargetConfig["type"]> = (
	config: Extract<TargetConfig, { type: K }>,
	deps: TargetDeps,
) => BuiltTarget;
