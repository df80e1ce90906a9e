/**
 * What a side shows of a certificate's intermediates, and whether that matches a bundle. Pure.
 *
 * Each side shows what it can: a local file gives every intermediate's SHA-256 (exact); HAProxy's
 * `show ssl cert` gives each intermediate's subject and issuer; the Data Plane API's runtime view only the
 * last pair (`chain_subject`/`chain_issuer`), its storage view only the issuers' CNs. Names are compared by
 * CN, the part every format prints the same way. What names cannot tell apart: an intermediate replaced by
 * one with the same subject and issuer (a re-keyed or re-issued intermediate) on those sides.
 */
import type { Bundle, CertificateInfo } from "./types.js";

export type ChainView =
	| { kind: "fingerprints"; fingerprints: string[] }
	| { kind: "names"; pairs: Array<{ subject: string; issuer: string }> }
	| { kind: "last-pair"; last?: { subject: string; issuer: string } }
	| { kind: "issuer-cns"; cns: string[] };

/**
 * The CN of a DN as HAProxy (`/C=x/O=y/CN=z`) or node:crypto (`C=x\nCN=z`) prints it; a bare CN (the Data
 * Plane API's `issuers`) is returned as is.
 */
export function commonName(dn: string): string {
	if (!dn.includes("CN=")) return dn.trim();
	// node:crypto escapes RFC 2253 specials (`Foo\, Inc.`); HAProxy prints them bare.
	return (/(?:^|[/\n])CN=([^/\n]*)/.exec(dn)?.[1] ?? "").replace(/\\(.)/g, "$1").trim();
}

function pair(c: CertificateInfo): { subject: string; issuer: string } {
	return { subject: c.subjectCn, issuer: c.issuerCn };
}

/** The exact view of a bundle's chain (what a readable file gives). */
export function chainFingerprints(chain: readonly CertificateInfo[]): ChainView {
	return { kind: "fingerprints", fingerprints: chain.map((c) => c.fingerprint) };
}

/** Does the side's view of the chain agree with the bundle's intermediates? */
export function chainMatches(view: ChainView, bundle: Bundle): boolean {
	switch (view.kind) {
		case "fingerprints":
			return (
				view.fingerprints.length === bundle.chain.length &&
				view.fingerprints.every((f, i) => f === bundle.chain[i]?.fingerprint)
			);
		case "names": {
			const want = bundle.chain.map(pair);
			return (
				view.pairs.length === want.length &&
				view.pairs.every(
					(p, i) => commonName(p.subject) === want[i]?.subject && commonName(p.issuer) === want[i]?.issuer,
				)
			);
		}
		case "last-pair": {
			const last = bundle.chain.at(-1);
			if (last === undefined || view.last === undefined) return last === undefined && view.last === undefined;
			const want = pair(last);
			return commonName(view.last.subject) === want.subject && commonName(view.last.issuer) === want.issuer;
		}
		case "issuer-cns": {
			// The server joins the CNs with ", " unordered: a CN with a comma in it (escaped or not) splits alike.
			const tokens = (cns: string[]) =>
				new Set(
					cns.flatMap((cn) =>
						cn
							.replaceAll("\\", "")
							.split(",")
							.map((t) => t.trim()),
					),
				);
			const want = tokens([bundle.leaf, ...bundle.chain].map((c) => c.issuerCn));
			const got = tokens(view.cns);
			return want.size === got.size && [...want].every((cn) => got.has(cn));
		}
		default: {
			const never: never = view;
			throw new Error(`unknown chain view ${JSON.stringify(never)}`);
		}
	}
}

/** HAProxy's `Algorithm:` line (`RSA2048`, `EC256`, `DSA1024`) as a key type. */
export function keyTypeOf(algorithm: string): CertificateInfo["keyType"] {
	const a = algorithm.trim().toUpperCase();
	if (a.startsWith("RSA")) return "rsa";
	if (a.startsWith("EC")) return "ec";
	if (a.startsWith("DSA")) return "dsa";
	if (a.startsWith("ED25519")) return "ed25519";
	if (a.startsWith("ED448")) return "ed448";
	return "other";
}
