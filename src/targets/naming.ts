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
