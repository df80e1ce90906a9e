/** Name and serial rules, shared by every part that compares certificates. Pure. */
import { isIP } from "node:net";

/** Lowercase, without a trailing dot. */
export function normaliseName(name: string): string {
	return name.trim().toLowerCase().replace(/\.$/, "");
}

/**
 * Does a certificate name (DNS SAN, possibly a wildcard, or an IP) cover a requested name? RFC 6125:
 * a wildcard is the whole leftmost label and stands for exactly one label, so `*.example.com` covers
 * `a.example.com` but neither `a.b.example.com` nor `example.com`.
 */
export function nameCovers(certName: string, wanted: string): boolean {
	const pattern = normaliseName(certName);
	const name = normaliseName(wanted);
	if (pattern === name) return true;
	if (!pattern.startsWith("*.") || isIP(name) !== 0) return false;
	const suffix = pattern.slice(1); // ".example.com"
	if (!name.endsWith(suffix)) return false;
	const head = name.slice(0, -suffix.length);
	return head.length > 0 && !head.includes(".");
}

/** The requested names that none of the certificate's names cover. */
export function uncoveredNames(certNames: readonly string[], wanted: readonly string[]): string[] {
	return wanted.filter((w) => !certNames.some((c) => nameCovers(c, w)));
}

/**
 * The one "names dropped" rule (plan and drivers): names the current certificate covers that the next one
 * does not cover, wildcard-aware (`www.example.com` -> `*.example.com` drops nothing; the reverse drops
 * `*.example.com`, a name the wildcard served for every label).
 */
export function droppedNames(current: readonly string[], next: readonly string[]): string[] {
	return uncoveredNames(next, current);
}

/**
 * Serial as HAProxy and `openssl x509 -serial` print it: uppercase hex, no leading zero bytes, even length.
 * The Data Plane API's storage side reports decimal, its runtime side hex: pass the radix.
 */
export function normaliseSerial(serial: string, radix: 10 | 16 = 16): string {
	const s = serial.trim().replace(/:/g, "");
	if (s === "") return "";
	let hex: string;
	if (radix === 10) {
		if (!/^\d+$/.test(s)) return s.toUpperCase();
		hex = BigInt(s).toString(16);
	} else {
		hex = s.replace(/^0x/i, "");
	}
	hex = hex.toUpperCase().replace(/^0+(?=.)/, "");
	return hex.length % 2 === 1 ? `0${hex}` : hex;
}

/** Sorted, de-duplicated, lowercase names: a SAN set's canonical form for comparisons. */
export function nameSet(names: readonly string[]): string[] {
	return [...new Set(names.map(normaliseName))].sort();
}

export function sameNameSet(a: readonly string[], b: readonly string[]): boolean {
	const x = nameSet(a);
	const y = nameSet(b);
	return x.length === y.length && x.every((n, i) => n === y[i]);
}
