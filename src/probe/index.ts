/**
 * Served-certificate probe: one TLS handshake by SNI, reporting the leaf the server presented. An IP address
 * is probed without SNI, as a client reaching the IP sends none (RFC 6066 §3): it sees the bind's default
 * certificate.
 * Verification is off on purpose: the probe reads what is served (expired, self-signed, wrong name
 * included) so certificatee can compare it with what it pushed. Nothing is sent after the handshake.
 */
import type { X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import { connect, type DetailedPeerCertificate } from "node:tls";
import { describeCertificate, normaliseSerial } from "../certificates/index.js";
import { CertificateeError } from "../errors.js";
import type { ServedCertificate } from "../reconcile/model.js";

export interface ProbeOptions {
	/** "host:port" ("[::1]:443" for IPv6). */
	address: string;
	/** Server name sent in the ClientHello; an IP address is probed without SNI. */
	sni: string;
	/** Optional CA bundle: when given, `verified` reports whether the chain checks out against it. */
	ca?: string;
	/** Default 5000 ms. */
	timeoutMs?: number;
	/**
	 * Ask as a client of this key type: "rsa" offers RSA signature algorithms only (a client that cannot
	 * verify ECDSA), "ec" offers ECDSA first and RSA after. HAProxy picks among a name's certificates by them.
	 */
	keyType?: ProbeKeyType;
	signal?: AbortSignal;
}

/** "ec-only": ECDSA signature algorithms alone (a client that cannot verify RSA), for a rollout's key-type check. */
export type ProbeKeyType = "rsa" | "ec" | "ec-only";

export interface ProbeResult extends ServedCertificate {
	/** SHA-256 of each certificate the server sent after the leaf, in order (uppercase hex). */
	chain: string[];
	/** PEM of the leaf and of each certificate sent after it, in order (public certificates only). */
	presented: string[];
	/** Only with `ca`: the served chain verified against it (names are not checked). */
	verified?: boolean;
}

import { parseHostPort } from "../base/address.js";

export { parseHostPort };

const RSA_SIGALGS = [
	"rsa_pss_rsae_sha256",
	"rsa_pss_rsae_sha384",
	"rsa_pss_rsae_sha512",
	"rsa_pkcs1_sha256",
	"rsa_pkcs1_sha384",
	"rsa_pkcs1_sha512",
];
const ECDSA_SIGALGS = ["ecdsa_secp256r1_sha256", "ecdsa_secp384r1_sha384", "ecdsa_secp521r1_sha512"];

/** The `sigalgs` a client of this key type offers (undefined: node's defaults). */
export function sigalgsFor(keyType: string | undefined): string | undefined {
	if (keyType === "rsa") return RSA_SIGALGS.join(":");
	if (keyType === "ec") return [...ECDSA_SIGALGS, ...RSA_SIGALGS].join(":");
	if (keyType === "ec-only") return ECDSA_SIGALGS.join(":");
	return undefined;
}

/** The leaf and the certificates sent after it, following issuer links until a repeat (a root links to itself). */
function sentChain(peer: DetailedPeerCertificate): Array<{ fingerprint: string; raw: Buffer }> {
	const seen = new Set<string>();
	const chain: Array<{ fingerprint: string; raw: Buffer }> = [];
	let next: DetailedPeerCertificate | undefined = peer;
	while (next?.fingerprint256 && !seen.has(next.fingerprint256)) {
		seen.add(next.fingerprint256);
		chain.push({ fingerprint: next.fingerprint256.replace(/:/g, ""), raw: next.raw });
		next = next.issuerCertificate;
	}
	return chain;
}

const pemOf = (der: Buffer) =>
	`-----BEGIN CERTIFICATE-----\n${der.toString("base64").replace(/.{1,64}/g, "$&\n")}-----END CERTIFICATE-----\n`;

/**
 * Node's code for a TLS alert the server sent: the listener answered TLS and refused this name's handshake.
 * OpenSSL 3.0 (Node 20) says `ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE`, 3.5 (Node 22.20+, 24)
 * `ERR_SSL_SSL/TLS_ALERT_HANDSHAKE_FAILURE`; `ERR_SSL_TLSV1_UNRECOGNIZED_NAME` and the like.
 */
const SERVER_ALERT = /^ERR_SSL_(SSLV3|TLSV1|SSL\/TLS)_(ALERT_|UNRECOGNIZED_NAME$)/;

/** The alert's name without OpenSSL's protocol prefix ("sslv3 alert ", "ssl/tls alert "): "handshake failure". */
function alertOf(e: unknown): { code: string; reason: string } | undefined {
	if (typeof e !== "object" || e === null || !("code" in e) || typeof e.code !== "string") return undefined;
	if (!SERVER_ALERT.test(e.code)) return undefined;
	const reason = "reason" in e && typeof e.reason === "string" ? e.reason : e.code;
	return { code: e.code, reason: reason.replace(/^(sslv3|tlsv1|ssl\/tls) (alert )?/, "") };
}

/**
 * The server refused the handshake for this name with a TLS alert: it holds no certificate for it that a client
 * of this key type accepts (a certificate not deployed yet), as opposed to a listener that cannot be reached.
 */
export function handshakeRefused(e: unknown): boolean {
	return e instanceof CertificateeError && e.code === "PROBE_FAILED" && alertOf(e.cause) !== undefined;
}

/** OpenSSL's texts carry file names, line numbers and a trailing newline: one line, what it says. */
function oneLine(text: string): string {
	return text.replace(/\s+/g, " ").trim();
}

export function probeServed(options: ProbeOptions): Promise<ProbeResult> {
	let target: { host: string; port: number };
	try {
		target = parseHostPort(options.address, "probe address");
	} catch (e) {
		return Promise.reject(e);
	}
	const { host, port } = target;
	const timeoutMs = options.timeoutMs ?? 5_000;
	const noSni = isIP(options.sni) !== 0;
	return new Promise((resolve, reject) => {
		const socket = connect({
			host,
			port,
			// Node sends no SNI for servername "" (and warns for an IP address there).
			servername: noSni ? "" : options.sni,
			rejectUnauthorized: false,
			ca: options.ca,
			ALPNProtocols: ["http/1.1"],
			...(options.keyType ? { sigalgs: sigalgsFor(options.keyType) } : {}),
		});
		const finish = (fn: () => void) => {
			clearTimeout(timer);
			options.signal?.removeEventListener("abort", onAbort);
			socket.destroy();
			fn();
		};
		const timer = setTimeout(
			() => finish(() => reject(probeError(options, `no handshake within ${timeoutMs} ms`))),
			timeoutMs,
		);
		const onAbort = () => finish(() => reject(probeError(options, "aborted")));
		options.signal?.addEventListener("abort", onAbort, { once: true });
		socket.once("secureConnect", () => {
			// Read the chain first: after getPeerX509Certificate(), node 20 reports no issuer links.
			const sent = sentChain(socket.getPeerCertificate(true));
			const peer = socket.getPeerX509Certificate();
			const verified = options.ca === undefined ? undefined : socket.authorized;
			finish(() => {
				if (peer) resolve(servedResult(options.sni, peer, sent, verified));
				else reject(probeError(options, "the server presented no certificate"));
			});
		});
		socket.once("error", (e) => finish(() => reject(handshakeError(options, e))));
	});
}

function probeError(
	options: ProbeOptions,
	reason: string,
	cause?: unknown,
	hint = "check the probe address and that the frontend listens with TLS",
): CertificateeError {
	const forWhom = isIP(options.sni) !== 0 ? `${options.sni} (no SNI)` : options.sni;
	return new CertificateeError("PROBE_FAILED", `TLS probe of ${options.address} for ${forWhom}: ${reason}`, {
		context: { endpoint: options.address, certificate: options.sni, operation: "probe" },
		retryable: true,
		hint,
		cause,
	});
}

/** The handshake failed: a TLS alert says the server holds no certificate for the name (for this client). */
function handshakeError(options: ProbeOptions, e: Error): CertificateeError {
	const alert = alertOf(e);
	if (!alert) return probeError(options, oneLine(e.message), e);
	const forKeyType = options.keyType ? ` for a client of key type ${options.keyType}` : "";
	return probeError(
		options,
		`the server refused the handshake (TLS alert: ${alert.reason}): it holds no certificate for ${options.sni}${forKeyType}`,
		e,
		`deploy a certificate for ${options.sni}${options.keyType ? ` (key type ${options.keyType})` : ""} to this frontend, or set a default certificate on its bind line`,
	);
}

/** What the server presented for `sni`: its leaf as certificatee compares it, and the chain it sent. */
function servedResult(
	sni: string,
	peer: X509Certificate,
	sent: Array<{ fingerprint: string; raw: Buffer }>,
	verified: boolean | undefined,
): ProbeResult {
	const info = describeCertificate(peer);
	const result: ProbeResult = {
		sni,
		serial: normaliseSerial(info.serial),
		fingerprint: info.fingerprint,
		names: [...new Set([...info.dnsNames, ...info.ipAddresses])].sort(),
		notAfter: info.notAfter,
		keyType: info.keyType,
		chain: sent.slice(1).map((c) => c.fingerprint),
		presented: sent.map((c) => pemOf(c.raw)),
	};
	if (verified !== undefined) result.verified = verified;
	return result;
}
