/** What an observed ref holds, side by side with a desired certificate: leaf, chain, names, key type. Pure. */
import { bundleNames } from "../../../certificates/bundle.js";
import { chainMatches } from "../../../certificates/chain.js";
import { nameSet } from "../../../certificates/names.js";
import type { Bundle, CertificateInfo } from "../../../certificates/types.js";
import type { DesiredCertificate, RefMeta } from "../../../reconcile/model.js";
import type { Side } from "../../../reconcile/verdict.js";
import type { ObservedRef } from "./model.js";

/** Does one side hold exactly this leaf? Compares fingerprints where the side reports them, else serials. */
export function sideMatches(meta: RefMeta | undefined, leaf: CertificateInfo): boolean {
	if (meta === undefined) return false;
	if (meta.fingerprint !== undefined) return meta.fingerprint === leaf.fingerprint;
	if (meta.sha1 !== undefined && meta.sha1 !== leaf.sha1) return false;
	return meta.serial !== undefined && meta.serial === leaf.serial;
}

/** Does one side hold exactly this bundle: the leaf, and the chain as far as the side shows it? */
export function sideHolds(meta: RefMeta | undefined, bundle: Bundle): boolean {
	if (!sideMatches(meta, bundle.leaf) || meta?.keyMismatch === true) return false;
	return meta?.chain === undefined || chainMatches(meta.chain, bundle);
}

/** What the ref serves (runtime first), and whether only its DNS names are known. */
export function namesOf(ref: ObservedRef): { names: string[]; dnsOnly: boolean } {
	const meta = ref.runtime?.names ? ref.runtime : ref.storage;
	return { names: nameSet(meta?.names ?? []), dnsOnly: meta?.namesDnsOnly === true };
}

export function refNames(ref: ObservedRef): string[] {
	return namesOf(ref).names;
}

/** The desired names comparable with what the ref shows (its DNS names only, when the side lacks IPs). */
export function comparableNames(d: DesiredCertificate, dnsOnly: boolean): string[] {
	return dnsOnly ? d.bundle.leaf.dnsNames : bundleNames(d.bundle);
}

/** Same public-key algorithm (HAProxy serves an RSA and an ECDSA certificate side by side); unknown matches. */
export function sameKeyType(ref: ObservedRef, d: DesiredCertificate): boolean {
	const keyType = ref.runtime?.keyType ?? ref.storage?.keyType;
	return keyType === undefined || keyType === d.bundle.leaf.keyType;
}

function presentSides(ref: ObservedRef): Side[] {
	const sides: Side[] = [];
	if (ref.storage) sides.push("storage");
	if (ref.runtime) sides.push("runtime");
	return sides;
}

export function staleSidesOf(ref: ObservedRef, bundle: Bundle): Side[] {
	return presentSides(ref).filter((side) => !sideHolds(ref[side], bundle));
}
