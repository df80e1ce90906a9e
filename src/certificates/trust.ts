/**
 * Chain trust: does a bundle's chain link, leaf to anchor, to a certificate of a trust store? The check a chain
 * must pass before it is pushed (a missing or wrong intermediate), and the one a rollout's canary runs on what
 * it serves. node:crypto alone (checkIssued + verify on each link); the store is read once, at the edge.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { CertificateeError } from "../errors.js";
import { splitPem } from "./pem.js";
import type { Bundle } from "./types.js";

/** Anchors a chain must reach; `source` names the store in every message ("/etc/ssl/bundle.pem", "system"). */
export interface TrustStore {
	source: string;
	anchors: readonly X509Certificate[];
}

export type TrustCode = "CHAIN_BROKEN" | "CHAIN_EXPIRED" | "CHAIN_UNTRUSTED";

export type TrustVerdict =
	| { ok: true; anchor: string }
	| { ok: false; code: TrustCode; message: string; hint: string };

/** A target's `trust_store`: a PEM bundle's path, or `system` (the OS CA bundle). */
export const trustStoreSchema = z
	.string()
	.min(1, { message: 'trust_store is a PEM bundle\'s path, or "system"' })
	.optional();

/** Where "system" is looked up, first found wins (`SSL_CERT_FILE` before them): Debian, RHEL, Alpine/BSD. */
const SYSTEM_BUNDLES = [
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
];

/** The certificates of PEM text, in order. */
export function certificatesOf(pem: string): X509Certificate[] {
	const split = splitPem(pem);
	if (!split.ok) return [];
	return split.blocks.filter((b) => b.label === "CERTIFICATE").map((b) => new X509Certificate(b.der));
}

/**
 * Reads a trust store: a PEM bundle's path, or "system" (the OS bundle). Throws CONFIG_INVALID naming `field`
 * and the file when it cannot be read or holds no certificate.
 */
export function loadTrustStore(spec: string, field: string): TrustStore {
	const paths =
		spec === "system"
			? [...(process.env.SSL_CERT_FILE ? [process.env.SSL_CERT_FILE] : []), ...SYSTEM_BUNDLES]
			: [spec];
	const problems: string[] = [];
	for (const path of paths) {
		let text: string;
		try {
			text = readFileSync(path, "utf8");
		} catch (e) {
			problems.push(`${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
			continue;
		}
		let anchors: X509Certificate[];
		try {
			anchors = certificatesOf(text);
		} catch (e) {
			problems.push(`${path}: a certificate does not parse (${(e as Error).message})`);
			continue;
		}
		if (anchors.length === 0) {
			problems.push(`${path}: no PEM certificate in it`);
			continue;
		}
		return { source: spec === "system" ? `system (${path})` : path, anchors };
	}
	throw new CertificateeError(
		"CONFIG_INVALID",
		`${field}: trust store ${spec} cannot be used: ${problems.join("; ")}`,
		{
			context: { field, file: spec },
			hint:
				spec === "system"
					? "install the OS CA bundle (ca-certificates) or set SSL_CERT_FILE, or name a PEM bundle"
					: "name a readable PEM file of the CA certificates the chain must reach (roots, or intermediates you trust)",
		},
	);
}

const describe = (c: X509Certificate) => c.subject.replaceAll("\n", ", ");

/**
 * Does the chain `[leaf, ...intermediates]` link, each issued and signed by the next, to an anchor of the store,
 * every link valid at `now`? Pure apart from the signatures' arithmetic. `what` names the chain in messages.
 */
export function verifyChain(
	chain: readonly X509Certificate[],
	store: TrustStore,
	now: Date,
	what: string,
): TrustVerdict {
	const leaf = chain[0];
	if (leaf === undefined)
		return { ok: false, code: "CHAIN_BROKEN", message: `${what}: no certificate`, hint: "check the bundle" };
	const anchored = (c: X509Certificate) => store.anchors.find((a) => a.fingerprint256 === c.fingerprint256);
	for (const [i, cert] of chain.entries()) {
		// A certificate of the chain that the store holds ends the walk: trusted as it stands.
		const held = i > 0 ? anchored(cert) : undefined;
		if (held) return { ok: true, anchor: describe(held) };
		if (i > 0 && (now < new Date(cert.validFrom) || now > new Date(cert.validTo)))
			return {
				ok: false,
				code: "CHAIN_EXPIRED",
				message: `${what}: intermediate ${describe(cert)} is not valid now (${cert.validFrom} to ${cert.validTo})`,
				hint: "replace the expired intermediate with the one the CA serves now (its chain URL, or the issuer's fullchain)",
			};
		const next = chain[i + 1];
		if (next === undefined) break;
		if (!cert.checkIssued(next) || !cert.verify(next.publicKey))
			return {
				ok: false,
				code: "CHAIN_BROKEN",
				message: `${what}: ${describe(cert)} (issuer ${cert.issuer.replaceAll("\n", ", ")}) is not signed by the next certificate of the chain, ${describe(next)}`,
				hint: "a wrong intermediate, or intermediates out of order: the chain goes leaf first, each certificate followed by its issuer",
			};
	}
	const last = chain.at(-1) as X509Certificate;
	const anchor = store.anchors.find((a) => last.checkIssued(a) && last.verify(a.publicKey));
	if (anchor) return { ok: true, anchor: describe(anchor) };
	const issuer = last.issuer.replaceAll("\n", ", ");
	return {
		ok: false,
		code: "CHAIN_UNTRUSTED",
		message: `${what}: the chain ends at ${describe(last)}, issued by ${issuer}, which trust store ${store.source} does not hold`,
		hint:
			chain.length === 1
				? `the bundle has no intermediates: add the intermediate that issued it (${issuer}) after the leaf`
				: `a missing intermediate (add the one for ${issuer} to the bundle), or a chain to another CA than ${store.source} trusts`,
	};
}

/** A bundle's chain as the push sends it (leaf, then the intermediates), checked against the store. */
export function verifyBundle(bundle: Bundle, store: TrustStore, now: Date, what: string): TrustVerdict {
	return verifyChain(certificatesOf(bundle.fullchainPem), store, now, what);
}

/** A verdict is reused for this long (a chain's validity dates are checked again after it). */
const REUSE_MS = 3_600_000;

/**
 * verifyBundle with its verdicts kept per chain and store for an hour: a check costs 1-3 ms (the signatures), and a
 * target checks every certificate every cycle. Entries no cycle asked for in the last hour are dropped.
 */
export function createTrustCache(): typeof verifyBundle {
	const kept = new Map<string, { verdict: TrustVerdict; at: number }>();
	return (bundle, store, now, what) => {
		const key = [store.source, what, bundle.leaf.fingerprint, ...bundle.chain.map((c) => c.fingerprint)].join(
			" ",
		);
		const hit = kept.get(key);
		const t = now.getTime();
		if (hit && t - hit.at < REUSE_MS && t >= hit.at) return hit.verdict;
		const verdict = verifyBundle(bundle, store, now, what);
		kept.set(key, { verdict, at: t });
		if (kept.size > 1024) for (const [k, v] of kept) if (t - v.at >= REUSE_MS) kept.delete(k);
		return verdict;
	};
}
