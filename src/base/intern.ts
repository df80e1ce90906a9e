/**
 * One copy of what a fleet reads many times over: a daemon observing 50 HAProxy nodes that hold the same 1,000
 * certificates reads each serial, fingerprint, subject and date 50 times, every cycle. Kept once, the copies
 * cost nothing; kept as read, each is also a slice of the socket answer it came from and holds all of it.
 *
 * Bounded by generations: when the current one holds `limit` entries it becomes the previous one and the
 * older one is dropped, so values no longer read (a renewed certificate's old serial) go within two turns.
 */
export interface Interner<V> {
	/** The kept value for `key`, made by `make` (and kept) the first time. */
	get(key: string, make: (key: string) => V): V;
}

export function createInterner<V>(limit = 100_000): Interner<V> {
	let current = new Map<string, V>();
	let previous = new Map<string, V>();
	return {
		get(key, make) {
			const hit = current.get(key);
			if (hit !== undefined) return hit;
			let value = previous.get(key);
			if (value === undefined) value = make(key);
			if (current.size >= limit) {
				previous = current;
				current = new Map();
			}
			// A string kept for itself is its own key: one copy, not two.
			current.set(typeof value === "string" && value === key ? value : flat(key), value);
			return value;
		},
	};
}

/**
 * A copy of `s` that holds no larger string: V8 keeps a substring of 13 characters or more as a slice of its
 * parent (a whole socket answer); concatenating flattens into a new string of its own length.
 */
export function flat(s: string): string {
	return s.length < 13 ? s : ` ${s}`.slice(1);
}

const strings = createInterner<string>();

/** The one kept copy of a string read from a server or a file (never a secret: they are kept until dropped). */
export function intern(s: string): string {
	return strings.get(s, flat);
}
