/** What the engine gives the HAProxy kinds beyond every kind's TargetDeps (../../types.ts). */
import type { FleetMemory } from "./fleet-memory.js";
import type { WriteQueues } from "./writers.js";

export interface HaproxyDeps {
	/** One write queue per HAProxy process, shared by every target built with it (one per engine). Without
	 * it the target gets queues of its own: its endpoints still share by address, other targets do not. */
	writeQueues?: WriteQueues;
	/** Where a target keeps what it remembers of its endpoints across restarts (backoff, pinned duplicates). */
	memory?: (target: string) => FleetMemory;
	/** false: endpoints that are backing off are tried anyway (an operator's one-shot `sync`). Default true. */
	backoff?: boolean;
	/** Endpoints processed at once inside a target (default 8, see FleetOptions.concurrency). */
	endpointConcurrency?: number;
}
