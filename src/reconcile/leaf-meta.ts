/**
 * What a PEM file on disk says of its certificate, as a RefMeta: the storage side of a haproxy-runtime ref,
 * and the live certificate of a directory target's set. Pure.
 */
import { X509Certificate } from "node:crypto";
import { type CertificateInfo, chainFingerprints, describeCertificate } from "../certificates/index.js";
import type { RefMeta } from "./model.js";

/** The leaf is the first certificate of a combined PEM (HAProxy's rule too); the others are its chain. */
export function leafMeta(pem: string): RefMeta {
	const blocks = pem.match(/-----BEGIN CERTIFICATE-----\r?\n[\s\S]*?-----END CERTIFICATE-----/g);
	if (!blocks?.[0]) return {};
	try {
		const [info, ...chain] = blocks.map((b) => describeCertificate(new X509Certificate(b)));
		if (info === undefined) return {};
		return metaOf(info, chain);
	} catch {
		return {};
	}
}

/** What leafMeta() reads from a file holding this leaf and chain (a bundle's combined PEM, without parsing it). */
export function metaOf(info: CertificateInfo, chain: readonly CertificateInfo[]): RefMeta {
	return {
		serial: info.serial,
		sha1: info.sha1,
		fingerprint: info.fingerprint,
		notAfter: info.notAfter,
		names: [...new Set([...info.dnsNames, ...info.ipAddresses])].sort(),
		keyType: info.keyType,
		chain: chainFingerprints(chain),
	};
}
