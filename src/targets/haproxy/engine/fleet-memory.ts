/**
 * What a fleet remembers about its endpoints between cycles (backoff after failures, duplicates whose
 * removal was refused), kept in the state store so that neither SIGHUP nor a restart forgets it.
 * Read when the target first runs; written only when it changed; never by plan or status.
 */
import { CertificateeError, describeError } from "../../../errors.js";
import {
	type EndpointMemory,
	endpointsKey,
	readTargetMemory,
	type TargetMemory,
	writeTargetMemory,
} from "../../../store/records.js";
import type { StateStore } from "../../../store/types.js";

export type { EndpointMemory };

export interface FleetMemory {
	/** The memory of the endpoints named; entries of other endpoints (no longer configured) are dropped. */
	load(endpoints: readonly string[]): Promise<Map<string, EndpointMemory>>;
	/**
	 * Writes the memory when it differs from what the store holds. `ran`: the endpoints this process ran in
	 * the cycle; a shared memory replaces only their entries and keeps what other replicas wrote for theirs.
	 */
	save(memory: ReadonlyMap<string, EndpointMemory>, ran?: readonly string[]): Promise<void>;
	/** Shared with other replicas (a cluster): loaded again every cycle, as endpoints move between them. */
	readonly shared?: boolean;
}

export interface StoredMemoryDeps {
	store: StateStore;
	/** plan and status: load, never save. */
	readOnly: boolean;
	/** Where a key is kept (a file path), named in the log when its record cannot be read. */
	locate?: (key: string) => string;
	warn: (fields: Record<string, unknown>, message: string) => void;
}

/** An endpoint with nothing to remember has no entry; entries sorted so equal memory serialises equally. */
function canonical(memory: ReadonlyMap<string, EndpointMemory>): TargetMemory {
	const endpoints: TargetMemory["endpoints"] = {};
	for (const name of [...memory.keys()].sort()) {
		const m = memory.get(name) as EndpointMemory;
		const refs = Object.keys(m.pinned).sort();
		const reloads = m.reloads ?? [];
		if (m.failures === 0 && m.skipLeft === 0 && refs.length === 0 && reloads.length === 0 && !m.breaker)
			continue;
		endpoints[name] = {
			failures: m.failures,
			skipLeft: m.skipLeft,
			pinned: Object.fromEntries(refs.map((r) => [r, m.pinned[r] as string])),
			...(reloads.length > 0 ? { reloads } : {}),
			...(m.breaker ? { breaker: m.breaker } : {}),
		};
	}
	return { endpoints };
}

const EMPTY = JSON.stringify(canonical(new Map()));

export function storedFleetMemory(target: string, deps: StoredMemoryDeps): FleetMemory {
	const key = endpointsKey(target);
	const where = (e: unknown) =>
		(e instanceof CertificateeError ? e.context.file : undefined) ?? deps.locate?.(key) ?? key;
	// The stored version to replace; undefined when the record cannot be read (then it is not replaced).
	let version: number | undefined = 0;
	// What the store holds, serialised: a save that would write the same is skipped.
	let stored = EMPTY;
	let refusedNoted = false;
	return {
		async load(endpoints) {
			let value: TargetMemory = { endpoints: {} };
			try {
				const record = await readTargetMemory(deps.store, target);
				version = record?.version ?? 0;
				if (record) value = record.value;
				stored = JSON.stringify(canonical(new Map(Object.entries(value.endpoints))));
			} catch (e) {
				// A shape the schema refuses still has a readable version: the next save replaces it.
				version = await deps.store.get(key).then(
					(r) => r?.version ?? 0,
					() => undefined,
				);
				stored = "";
				deps.warn(
					{ target, file: where(e), error: describeError(e) },
					`endpoint state unreadable: starting from empty (backoff and pinned duplicates forgotten); ${
						version === undefined
							? "kept in memory only until the file is deleted"
							: "replaced at the next change"
					}`,
				);
			}
			const configured = new Set(endpoints);
			return new Map(Object.entries(value.endpoints).filter(([name]) => configured.has(name)));
		},
		async save(memory) {
			if (deps.readOnly) return;
			const value = canonical(memory);
			const json = JSON.stringify(value);
			if (json === stored) return;
			if (version === undefined) {
				if (!refusedNoted) {
					refusedNoted = true;
					deps.warn(
						{ target, file: deps.locate?.(key) ?? key },
						"endpoint state not saved: its file cannot be read; delete it so certificatee can write it again",
					);
				}
				return;
			}
			try {
				version = await writeTargetMemory(deps.store, target, value, version);
				stored = json;
			} catch (e) {
				deps.warn(
					{ target, file: where(e), error: describeError(e) },
					"endpoint state not saved; tried again at the next change",
				);
				version = await deps.store.get(key).then(
					(r) => r?.version ?? 0,
					() => undefined,
				);
			}
		},
	};
}

/** Attempts of a shared save that keeps meeting another replica's write (compare-and-swap) before it gives up. */
const SHARED_SAVE_ATTEMPTS = 3;

/**
 * The memory of a target in a store other replicas write too (etcd, docs/cluster.md): loaded fresh every cycle,
 * and saved by merging, per endpoint, the entries of the endpoints this replica ran into what the store holds,
 * with compare-and-swap (retried on a conflict). An endpoint that moves to another replica takes its backoff
 * and pinned duplicates with it.
 */
export function sharedFleetMemory(target: string, deps: StoredMemoryDeps): FleetMemory {
	const key = endpointsKey(target);
	const read = async (): Promise<{ version: number; endpoints: Map<string, EndpointMemory> }> => {
		const record = await readTargetMemory(deps.store, target);
		return {
			version: record?.version ?? 0,
			endpoints: new Map(Object.entries(record?.value.endpoints ?? {})),
		};
	};
	return {
		shared: true,
		async load(endpoints) {
			try {
				const { endpoints: stored } = await read();
				const configured = new Set(endpoints);
				return new Map([...stored].filter(([name]) => configured.has(name)));
			} catch (e) {
				deps.warn(
					{ target, key, error: describeError(e) },
					"shared endpoint state unreadable: this cycle starts from empty (backoff and pinned duplicates)",
				);
				return new Map();
			}
		},
		async save(memory, ran) {
			if (deps.readOnly) return;
			const mine = new Set(ran ?? memory.keys());
			for (let attempt = 1; attempt <= SHARED_SAVE_ATTEMPTS; attempt++) {
				try {
					const current = await read();
					const merged = new Map(current.endpoints);
					for (const name of mine) {
						const m = memory.get(name);
						if (m) merged.set(name, m);
						else merged.delete(name);
					}
					const before = JSON.stringify(canonical(current.endpoints));
					const after = canonical(merged);
					if (JSON.stringify(after) === before) return;
					await writeTargetMemory(deps.store, target, after, current.version);
					return;
				} catch (e) {
					const conflict = e instanceof CertificateeError && e.code === "STATE_CONFLICT";
					if (conflict && attempt < SHARED_SAVE_ATTEMPTS) continue;
					deps.warn(
						{ target, key, error: describeError(e) },
						"shared endpoint state not saved; tried again at the next cycle",
					);
					return;
				}
			}
		},
	};
}
