/**
 * Incremental observation of one Data Plane API endpoint: what the last observation read, and when it may stand
 * in for the per-certificate GETs of this one. Pure; index.ts keeps one memory per endpoint.
 *
 * The API's listings say only which items exist: `GET /storage/ssl_certificates` gives each file's `file`,
 * `storage_name` and `description` (dataplaneapi handlers/storage/ssl_certificates/ssl_certificates.go,
 * GetAllStorageSSLCertificates, over client-native storage/storage.go `GetAll`), `GET /runtime/ssl_certs` each
 * store's `storage_name` and `description` (client-native runtime/certs.go `parseCerts` over `show ssl cert`):
 * no size, date, serial or fingerprint. So between full observations an item whose name is listed as before,
 * under the same worker, keeps the metadata its last GET gave; what certificatee wrote since is read again.
 */
import type { ActionResult, RefMeta } from "../../reconcile/model.js";
import { desiredChanged, fullIsDue, scheduledFull } from "../haproxy/engine/full-schedule.js";
import type { HaproxyAction } from "../haproxy/engine/model.js";
import { sameWorker, type WorkerIdentity } from "../haproxy/engine/writers.js";

export interface FetchedStorage {
	storageName: string;
	file?: string;
	meta: RefMeta;
	/** The name the API would really address (its sanitised form), when it differs: never read or written. */
	addressedAs?: string;
}

export interface FetchedRuntime {
	name: string;
	meta: RefMeta;
	/** Why the API cannot read its metadata (RUNTIME_SEPARATE_KEY): HAProxy lists it, nothing more is known. */
	unreadable?: string;
}

export interface ObservationMemory {
	worker: WorkerIdentity;
	/** The worker's uptime then (s): a smaller one under the same pid is a restart. */
	uptimeSec: number;
	/** storage_name -> the file's metadata, as its last GET gave it. */
	storage: ReadonlyMap<string, FetchedStorage>;
	/** HAProxy's store name -> its metadata, as its last GET gave it. */
	runtime: ReadonlyMap<string, FetchedRuntime>;
	/** The crt-lists and their entries, as one string (any change makes the next observation full). */
	crtLists: string;
	/** Observations since the last scheduled full one (the first counts from the endpoint's phase: full-schedule.ts). */
	sinceFull: number;
	/** desiredKey() of the desired set the observation was made for, when the cycle gave one. */
	desired?: string;
}

/** What certificatee changed on the endpoint since its last observation (noted after each write). */
export interface Touched {
	/** Storage names whose file was replaced. */
	storage: Set<string>;
	/** Store names set at runtime. */
	runtime: Set<string>;
	/** Something else changed (a file or store added or deleted, a crt-list, a reload) or a write failed. */
	all: boolean;
}

export const untouched = (): Touched => ({ storage: new Set(), runtime: new Set(), all: false });

/**
 * Notes one write: a replaced file or a runtime update of a store name is read again at the next observation;
 * anything else, a failed write or one that caused a reload makes it full (names appear or go, crt-list
 * membership and status change, another worker loads the files).
 */
export function noteWrite(touched: Touched, action: HaproxyAction, result: ActionResult): void {
	const ok = result.ok && result.reloadCaused === undefined;
	if (ok && action.op === "storage-replace" && action.files === undefined) touched.storage.add(action.ref);
	else if (ok && action.op === "runtime-set" && !action.runtimeName.startsWith("@"))
		touched.runtime.add(action.runtimeName);
	else touched.all = true;
}

/** What an observation lists before any per-item GET: the listings, and the crt-lists and loads as one string. */
export interface Listed {
	storage: ReadonlyArray<{ storageName: string; file?: string }>;
	runtime: readonly string[];
	crtLists: string;
}

export interface Listing extends Listed {
	worker?: WorkerIdentity;
	uptimeSec?: number;
	/** desiredKey() of this cycle's desired set: a changed one defers a due scheduled full observation once. */
	desired?: string;
}

export interface ReuseRules {
	/** Every full_observation_every-th observation is full. */
	every: number;
	/** The API reaches HAProxy through its master CLI: a reload cannot answer as the old worker. */
	masterRuntime: boolean;
}

/**
 * Why this observation must GET every item again, or undefined when the last one stands in for all but
 * certificatee's own writes: it is not the first nor the every-th, the same worker answers (not restarted), the
 * listings name the same items, the crt-lists are unchanged, certificatee changed nothing but file and store
 * contents, and (without master_runtime) nothing since the last observation at all: after its writes a
 * stats-socket endpoint is observed in full, as before incremental observation.
 */
export function fullBecause(
	memory: ObservationMemory | undefined,
	touched: Touched,
	now: Listing,
	rules: ReuseRules,
): string | undefined {
	if (memory === undefined) return "first";
	if (fullIsDue(memory.sinceFull, rules.every, desiredChanged(memory.desired, now.desired))) {
		return scheduledFull(rules.every);
	}
	if (now.worker === undefined || now.uptimeSec === undefined) return "the API names no worker";
	if (!sameWorker(memory.worker, now.worker)) return "worker changed";
	if (now.uptimeSec < memory.uptimeSec) return "worker restarted";
	if (touched.all) return "certificatee added or removed certificates, edited a crt-list, or a write failed";
	if (!rules.masterRuntime && (touched.storage.size > 0 || touched.runtime.size > 0))
		return "written through a worker's stats socket (master_runtime: false)";
	if (
		now.storage.length !== memory.storage.size ||
		now.storage.some(
			(s) => !memory.storage.has(s.storageName) || memory.storage.get(s.storageName)?.file !== s.file,
		)
	)
		return "storage listing changed";
	if (now.runtime.length !== memory.runtime.size || now.runtime.some((n) => !memory.runtime.has(n)))
		return "runtime listing changed";
	if (now.crtLists !== memory.crtLists) return "crt-lists changed";
	return undefined;
}

/** What an incremental observation takes from memory: every item certificatee did not write since. */
export function reusable(memory: ObservationMemory, touched: Touched) {
	return {
		storage: (name: string) => (touched.storage.has(name) ? undefined : memory.storage.get(name)),
		runtime: (name: string) => (touched.runtime.has(name) ? undefined : memory.runtime.get(name)),
	};
}
export type Reusable = ReturnType<typeof reusable>;

// A fleet holds the same certificates on every node: what the memories of its endpoints keep is held once per
// distinct item (name, path, metadata), for as long as any endpoint keeps it.
const interned = new Map<string, WeakRef<object>>();
const held = new WeakSet<object>();
const sweep = new FinalizationRegistry<string>((key) => {
	if (interned.get(key)?.deref() === undefined) interned.delete(key);
});

/** The one held copy of an item equal to `item` (its name, path and metadata), `item` itself the first time. */
export function intern<T extends FetchedStorage | FetchedRuntime>(item: T): T {
	// An item an incremental observation took from memory is held already: no key to build (7 % of the fleet's
	// CPU when every item was keyed again at every observation).
	if (held.has(item)) return item;
	const key = JSON.stringify(item);
	const known = interned.get(key)?.deref();
	if (known !== undefined) return known as T;
	interned.set(key, new WeakRef(item));
	held.add(item);
	sweep.register(item, key);
	return item;
}
