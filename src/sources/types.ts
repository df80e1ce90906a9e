/** Where desired certificates come from: sources that read them, issuers that make them. */
import type { DesiredCertificate, SourceProblem } from "../reconcile/model.js";
import type { StateStore } from "../store/types.js";
import type { ChallengeMapNode } from "../targets/haproxy/challenge-map.js";

export interface SourceResult {
	certificates: DesiredCertificate[];
	/** Inputs that were skipped, each with its reason; valid ones are still served. */
	problems: SourceProblem[];
}

/**
 * A source of ready-made certificates (a directory of PEMs, ...). load() never throws for one bad file.
 * watch(), when the kind can, calls onChange (debounced) when its input changed, so the daemon runs a cycle
 * promptly; it returns a function that stops watching.
 */
export interface Source {
	readonly name: string;
	load(signal: AbortSignal): Promise<SourceResult>;
	watch?(onChange: () => void): () => void;
}

export type KeyType = "ecdsa-p256" | "ecdsa-p384" | "rsa-2048" | "rsa-4096";

export interface IssueRequest {
	/** The certificates[].name from config. */
	certificate: string;
	domains: string[];
	keyType: KeyType;
	/** Requested lifetime in ms, for issuers that choose it (local CA); ACME CAs decide for themselves. */
	lifetimeMs?: number;
	/** ACME profile to ask for (draft-ietf-acme-profiles); absent: the issuer's own default, if any. */
	profile?: string;
	/** PEM of the certificate this order replaces (ACME sends its ARI certID as `replaces`, RFC 9773). */
	replaces?: string;
}

export interface IssuedPem {
	certPem: string;
	/** Intermediates, leaf-to-root. */
	chainPem: string;
	keyPem: string;
	/** The ACME profile the CA issued it under (the order's `profile`), when there was one. */
	profile?: string;
}

/** A suggested renewal window (ACME ARI, RFC 9773). */
export interface RenewalWindow {
	start: Date;
	end: Date;
}

/**
 * Something that issues certificates (local CA, ACME). issue() either returns a complete PEM set or
 * throws a CertificateeError (ACME problem type and detail in the message). renewalWindow() is
 * optional: issuers whose CA advertises ARI return its window for an issued certificate.
 */
export interface Issuer {
	readonly name: string;
	issue(request: IssueRequest, signal: AbortSignal): Promise<IssuedPem>;
	renewalWindow?(certPem: string, signal: AbortSignal): Promise<RenewalWindow | undefined>;
	/** Revokes a certificate this issuer issued (ACME revokeCert; the local CA records it). */
	revoke?(certPem: string, reason: RevocationReason, signal: AbortSignal): Promise<void>;
	/** Removes what an earlier run left where this issuer publishes challenges (HTTP-01 tokens in HAProxy
	 * maps); the daemon calls it once at start. Orders wait for it. */
	prepare?(signal: AbortSignal): Promise<void>;
}

/** RFC 5280 §5.3.1 reason codes an ACME CA accepts (Let's Encrypt's list). */
export const REVOCATION_REASONS = {
	unspecified: 0,
	keyCompromise: 1,
	affiliationChanged: 3,
	superseded: 4,
	cessationOfOperation: 5,
} as const;
export type RevocationReason = keyof typeof REVOCATION_REASONS;

/** What every source kind's factory receives. */
export interface SourceDeps {
	/** The state store: issuers keep their CA or account there (never files of their own). */
	store: StateStore;
	clock?: () => Date;
	/** The HAProxy nodes of the named targets, for `http01: { via: haproxy-map }` (built by the target registry). */
	challengeMaps?: ChallengeMaps;
	/**
	 * This machine's state store (state_dir, also in a cluster: a directory source reads this machine's files): a
	 * directory source keeps there what it serves in place of its files, so every process serves the same.
	 */
	local?: {
		store: StateStore;
		/** plan and status: read, never write. */
		readOnly: boolean;
		warn: (fields: Record<string, unknown>, message: string) => void;
	};
}

export type ChallengeMaps = (targets: readonly string[], map: string) => ChallengeMapNode[];

/**
 * A configured source kind is either a Source of ready-made certificates or an Issuer. close() releases what it
 * holds (the ACME issuer's connection pool); the engine calls it when a configuration is replaced or the daemon
 * stops. Watches are stopped by the function watch() returned, before close().
 */
export type BuiltSource = ({ role: "source"; source: Source } | { role: "issuer"; issuer: Issuer }) & {
	close(): Promise<void>;
};
