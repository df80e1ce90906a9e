/**
 * From where a ref lives (its Placement) to the files of a write, and which refs are a desired certificate's
 * keeper in place. Pure: the plan asks here instead of assuming one combined PEM in a storage directory.
 *
 * Companion files of a renewed certificate (HAProxy's `ssl-load-extra-files`):
 * - `.key` beside a combined PEM: HAProxy ignores it while the PEM holds a key, but it is a private key that
 *   matches no certificate once the certificate is renewed: removed in the same write.
 * - `.ocsp`: an OCSP response names the certificate it is for; the old one is stale for the new certificate
 *   (HAProxy refuses to staple a response for another certificate, and an old HAProxy fails to load it):
 *   removed before the new certificate is written. `ocsp-update on` fetches a new one.
 * - `.sctl`: signed certificate timestamps are signatures over the old certificate: removed the same way, where
 *   a write happens at all (a runtime update of a certificate loaded with one crashes HAProxy: classify-keeper.ts
 *   refuses it).
 * - `.issuer`: the issuer's certificate, used for OCSP only when the chain lacks it. certificatee always writes
 *   the chain, so HAProxy finds the issuer there first: kept (it belongs to the CA, not to the certificate).
 */
import { sameNameSet } from "../../../certificates/names.js";
import type { DesiredCertificate } from "../../../reconcile/model.js";
import type { ObservedRef, PlacedWrite, Placement } from "./model.js";

/** The files of a storage write of a ref placed so, or why it is never written. */
export function placedWrite(p: Placement): PlacedWrite | { refused: string } {
	if (p.acme !== undefined) {
		return {
			refused: `managed by HAProxy's own ACME client (acme section "${p.acme}"): certificatee never writes it`,
		};
	}
	if (p.unknown !== undefined || p.certFile === undefined) {
		return { refused: p.unknown ?? "its certificate file is unknown" };
	}
	const cert = p.certFile;
	const removeFirst = [p.extras.ocsp, p.extras.sctl].filter((f): f is string => f !== undefined);
	if (p.key === undefined) {
		const stray = p.extras.key;
		return {
			files: [{ path: cert, part: "combined" }],
			removeFirst,
			removeAfter: stray ? [stray] : [],
			safeOrder: true,
		};
	}
	if (p.key.by === "companion") {
		// X with the key inside loads (the companion is ignored), then the new key beside it, then X without it.
		return {
			files: [
				{ path: cert, part: "combined" },
				{ path: p.key.file, part: "key" },
				{ path: cert, part: "certificates" },
			],
			removeFirst,
			removeAfter: [],
			safeOrder: true,
		};
	}
	// A `key` argument overrides a key inside the crt file: no order of two renames avoids one mismatched state.
	return {
		files: [
			{ path: p.key.file, part: "key" },
			{ path: cert, part: "certificates" },
		],
		removeFirst,
		removeAfter: [],
		safeOrder: false,
	};
}

/** Placements a desired certificate is updated in place at (a crt-store load, an ssl-f-use line). */
const IN_PLACE: ReadonlySet<Placement["via"]> = new Set(["crt-store", "ssl-f-use"]);

function namesOf(ref: ObservedRef): string[] {
	return (ref.runtime?.names ?? ref.storage?.names ?? []).map((n) => n.toLowerCase());
}

/**
 * The ref a desired certificate is kept at: its canonical ref, unless HAProxy does not load that one and it
 * already loads exactly one certificate of the same names and key type from a crt-store or an ssl-f-use line
 * (or one its own ACME manages): then that one, updated in place (or, ACME, left alone), never a second file
 * that nothing loads. The canonical ref then is a legacy duplicate, removed once the keeper is stable.
 */
export function keeperRef(
	canonical: string,
	desired: DesiredCertificate,
	refs: ReadonlyMap<string, ObservedRef>,
	taken: ReadonlySet<string>,
): string {
	if (refs.get(canonical)?.runtime !== undefined) return canonical;
	const dnsOnly = (r: ObservedRef) => r.runtime?.namesDnsOnly === true;
	const wanted = (r: ObservedRef) =>
		dnsOnly(r)
			? desired.bundle.leaf.dnsNames
			: [...desired.bundle.leaf.dnsNames, ...desired.bundle.leaf.ipAddresses];
	// `<name>.crt` + `<name>.key` in a crt directory (ssl-load-extra-del-ext) is that certificate's own pair,
	// refused while its key file is unknown (then nothing is written, not a second file beside it).
	const delExtPair = (r: ObservedRef) =>
		r.ref === canonical.replace(/\.pem$/, ".crt") &&
		(r.placement?.key?.by === "companion" || r.placement?.unknown !== undefined);
	const candidates = [...refs.values()].filter(
		(r) =>
			r.placement !== undefined &&
			(IN_PLACE.has(r.placement.via) || r.placement.acme !== undefined || delExtPair(r)) &&
			r.runtime !== undefined &&
			!taken.has(r.ref) &&
			(r.runtime.keyType === undefined || r.runtime.keyType === desired.bundle.leaf.keyType) &&
			sameNameSet(namesOf(r), wanted(r)),
	);
	return candidates.length === 1 ? (candidates[0] as ObservedRef).ref : canonical;
}
