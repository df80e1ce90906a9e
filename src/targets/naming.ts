/** Storage names as the Data Plane API makes them, shared by both HAProxy target kinds. Pure. */

/**
 * The Data Plane API keeps the extension after the last dot and turns every run of characters outside
 * [A-Za-z0-9_-] in the rest into "_": `example.com.pem` is stored as `example_com.pem`.
 */
export function sanitizeStorageName(name: string): string {
	const dot = name.lastIndexOf(".");
	const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
	return stem.replace(/[^A-Za-z0-9_-]+/g, "_") + ext;
}

/** The canonical ref of a certificate on every HAProxy target: its config name, sanitised, with `.pem`. */
export function canonicalRef(certificateName: string): string {
	return sanitizeStorageName(`${certificateName}.pem`);
}

/**
 * Certificate names that give one canonical ref (`example.com` and `example_com` both give `example_com.pem`):
 * on an HAProxy target they would overwrite each other's file every cycle. Each group in first-seen order.
 */
export function canonicalCollisions(names: readonly string[]): Array<{ ref: string; names: string[] }> {
	const byRef = new Map<string, string[]>();
	for (const name of new Set(names)) {
		const ref = canonicalRef(name);
		byRef.set(ref, [...(byRef.get(ref) ?? []), name]);
	}
	return [...byRef].filter(([, group]) => group.length > 1).map(([ref, group]) => ({ ref, names: group }));
}
