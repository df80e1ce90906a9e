/** Storage names as the Data Plane API makes them, shared by both HAProxy target kinds. Pure. */

const OUTSIDE = /[^A-Za-z0-9_\\-]+/g;

/** Go's filepath.Clean for the forms a stem can take: no empty, `.` or `..` elements, no trailing slash. */
function cleanPath(path: string): string {
	const absolute = path.startsWith("/");
	const parts: string[] = [];
	for (const part of path.split("/")) {
		if (part === "" || part === ".") continue;
		if (part === ".." && parts.length > 0 && parts.at(-1) !== "..") parts.pop();
		else if (part !== ".." || !absolute) parts.push(part);
	}
	const joined = parts.join("/");
	return absolute ? `/${joined}` : joined || ".";
}

/**
 * client-native's `misc.SanitizeFilename`, which the Data Plane API applies to upload names and to the
 * `{name}` of storage GET, PUT and DELETE: the extension (from the last dot, Go's filepath.Ext) is kept, the
 * stem is path-cleaned, and every run of characters outside [A-Za-z0-9_\-] in either becomes "_".
 * `example.com.pem` is stored as `example_com.pem`.
 */
export function sanitizeStorageName(name: string): string {
	const slash = name.lastIndexOf("/");
	const dot = name.lastIndexOf(".");
	const ext = dot > slash ? name.slice(dot) : "";
	let stem = name.slice(0, name.length - ext.length);
	if (stem !== "") stem = cleanPath(stem);
	stem = stem.replace(OUTSIDE, "_");
	if (ext === "") return stem;
	const cleanExt = ext.slice(1).replace(OUTSIDE, "_");
	return stem === "" ? `_${cleanExt}` : `${stem}.${cleanExt}`;
}

/**
 * Can the Data Plane API address this storage file by name? Only when the sanitiser leaves the name as it
 * is: otherwise a GET, PUT or DELETE of it reaches the file the sanitised name points to (another file, or
 * nothing).
 */
export function apiAddressable(storageName: string): boolean {
	return sanitizeStorageName(storageName) === storageName;
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
