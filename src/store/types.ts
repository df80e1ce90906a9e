/**
 * Where certificatee keeps what it must not forget: issued certificates, the ACME account, renewal state.
 * Narrow on purpose, so an etcd-backed store (compare-and-swap on a revision, watch) can replace the files.
 */

/** A value with the version it was read at. Versions start at 1; 0 means "absent" in put(). */
export interface Versioned<T = unknown> {
	value: T;
	version: number;
}

/**
 * Keys are "/"-separated segments of [A-Za-z0-9._-] (e.g. "certificates/example-com"); values are JSON.
 * get() returns undefined for a missing key. put() writes only when the stored version equals
 * `expectedVersion` (0 = must not exist) and returns the new version; otherwise it throws STATE_CONFLICT.
 * A put is atomic: a reader or a crash sees the old value or the new one, never a mix.
 * list() returns the keys under a prefix, sorted. watch() calls back after each change under a prefix and
 * returns a function that stops watching.
 */
export interface StateStore {
	get(key: string): Promise<Versioned | undefined>;
	put(key: string, value: unknown, expectedVersion: number): Promise<number>;
	list(prefix: string): Promise<string[]>;
	watch(prefix: string, onChange: (key: string) => void): () => void;
	/** Where a key lives (a file path), for errors an operator acts on; absent when the backend has no such thing. */
	location?(key: string): string;
}
