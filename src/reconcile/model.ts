/**
 * The plain data the reconciler works on: what an endpoint holds (observation), what should be there
 * (desired certificates), and the operations that move one to the other (actions). No I/O here.
 */
import type { ChainView } from "../certificates/chain.js";
import type { Bundle, CertificateInfo } from "../certificates/types.js";
import type { CertificateeError } from "../errors.js";

/**
 * Why a write is not live without a reload: `new-certificate` (a new file HAProxy loads only at a reload: a
 * `crt <dir>/` bind without a runtime crt-list, or a crt-list HAProxy has not loaded), `too-large` (the
 * request would reach tune.bufsize: never hot-swapped). See reload-budget.ts.
 */
export type ReloadReason = "new-certificate" | "too-large";

/** One reload certificatee did (or tried), as remembered in the state store. */
export interface ReloadRecord {
	/** ISO time the reload was asked for. */
	at: string;
	reasons: ReloadReason[];
	/** ok: the new worker serves what was written; failed: the reload failed; not-served: it reloaded, but the probe disagrees. */
	result: "ok" | "failed" | "not-served";
}

/** Open: writes to the endpoint stop until it serves what was written again, or an operator clears it. */
export interface BreakerState {
	openedAt: string;
	code: "RELOAD_FAILED";
	message: string;
}

export interface BudgetView {
	maxPerHour: number;
	used: number;
	remaining: number;
	/** When the oldest counted reload leaves the window (ISO), when the budget is used up and not 0. */
	nextAt?: string;
}

/** Which ref serves a name after a plan's runtime writes (targets/haproxy/engine/serving.ts). */
export interface ServingAfter {
	sni: string;
	/** The ref that serves the name after the writes (for the keeper's key type). */
	ref: string;
	/** The desired certificate whose name it is. */
	certificate: string;
}

/** One certificate certificatee is responsible for, from a source or an issuer. */
export interface DesiredCertificate {
	/** Config name, e.g. "example-com". */
	name: string;
	/** DNS and IP names the certificate must cover (lowercase). */
	names: string[];
	bundle: Bundle;
	/** Where it came from, for reports: "source files: /etc/certs/example.pem". */
	origin: string;
	/**
	 * An operator chose this very certificate as a deliberate replacement (`certificatee replace`): never-downgrade
	 * does not hold it back from replacing a live certificate that expires later.
	 */
	replacement?: ReplacementView;
}

/** A deliberate replacement as reports show it (no key material). */
export interface ReplacementView {
	reason: string;
	by: string;
	requestedAt: string;
	/** The certificate it replaced, as served when it was recorded. */
	replaces?: { serial: string; notAfter: string };
}

/** What one side (storage on disk, or HAProxy's runtime memory) says about a ref. */
export interface RefMeta {
	/** Uppercase hex, even length (normalised: storage reports decimal, runtime hex). */
	serial?: string;
	/** SHA-1 of the leaf DER, uppercase hex, when the side reports it (runtime). */
	sha1?: string;
	/** SHA-256 of the leaf DER, when the side can compute it (local files). */
	fingerprint?: string;
	notAfter?: Date;
	/** DNS and IP names the certificate covers, lowercase, sorted. */
	names?: string[];
	/** `names` holds DNS names only (HAProxy's listing prints no IP SANs, and no file told them). */
	namesDnsOnly?: boolean;
	/** The leaf's public-key algorithm: HAProxy serves one certificate per key type for a name. */
	keyType?: CertificateInfo["keyType"];
	/** What the side shows of the intermediates (exact on local files, by name elsewhere). */
	chain?: ChainView;
	/** HAProxy's runtime status: Used, Unused, Empty, Uncommitted. */
	status?: string;
	/**
	 * Storage side: the key a reload pairs with this leaf (a separate key file, or a `.key` left beside a
	 * combined PEM) does not belong to it. The side holds nothing usable: a reload would serve no certificate.
	 */
	keyMismatch?: true;
}

/**
 * A single write of any target, as the cycle and the report see it: each kind owns the union of its writes
 * (targets/haproxy/engine/model.ts, targets/directory/action.ts) and plans only those.
 */
export interface Action {
	op: string;
	/** What the write addresses: a storage name, a set's path. */
	ref: string;
	/** The desired certificate it writes or is about. */
	certificate?: string;
	bundle?: Bundle;
	crtList?: string;
}

/** One write and why (`why` is shown in plans). */
export interface PlannedStep<A extends Action> {
	action: A;
	why: string;
}

export interface ActionResult {
	action: Action;
	ok: boolean;
	/** The server scheduled or did a reload (Data Plane API 202 + Reload-ID). Never asked for; always reported. */
	reloadCaused?: { reloadId?: string; reason: string };
	/** Set when `ok` is false. */
	error?: CertificateeError;
	/** e.g. "storage delete answered 404: already gone". */
	note?: string;
	/** The write is on disk but only a reload makes it live (the storage write of the same ref holds it). */
	reloadNeeded?: ReloadReason;
}

/** How an asked-for reload ended: ok once a new worker answers; never hidden. */
export type ReloadOutcome =
	| { ok: true; from?: number; to?: number; detail: string }
	| { ok: false; error: CertificateeError };

/** What a TLS handshake by SNI showed. */
export interface ServedCertificate {
	sni: string;
	serial: string;
	fingerprint: string;
	names: string[];
	notAfter: Date;
	/** The served leaf's public-key algorithm (a client's signature algorithms choose among key types). */
	keyType?: CertificateInfo["keyType"];
	/** SHA-256 of each certificate sent after the leaf, in order (a TLS probe tells). */
	chain?: string[];
	/** PEM of the leaf and each certificate sent after it (a TLS probe tells): what a rollout's trust check verifies. */
	presented?: string[];
}

/** A TLS handshake by SNI at an endpoint's probe address; keyType: shake hands as a client of that key type (HAProxy picks among a name's certificates by it). */
export type ServedProbe = (
	sni: string,
	signal: AbortSignal,
	keyType?: "rsa" | "ec" | "ec-only",
) => Promise<ServedCertificate>;

export interface SourceProblem {
	/** File or certificate name the problem is about. */
	subject: string;
	error: CertificateeError;
	/** The certificate it is about, when a file of a certificate's name cannot be used (its name is the file's stem). */
	certificate?: string;
	/** A failed order (the renewal status carries it too): reported with the order, not as a source file. */
	order?: true;
}

export interface DesiredSet {
	certificates: DesiredCertificate[];
	/** Source files and state that could not be used, and failed orders (marked `order`). */
	problems: SourceProblem[];
	/** Where each issued certificate stands, when certificatee issues any. */
	renewals?: RenewalView[];
}

/**
 * Where an issued certificate stands: `issued` (in service, not due), `due` (the next sync orders it),
 * `ordering` (an order is in flight in another process), `failing` (the last order failed; the next sync
 * retries), `backing-off` (the last order failed; no order before `nextAttemptAt`), `capped` (the daily
 * order cap stopped ordering until `nextAttemptAt`).
 */
export type RenewalState = "issued" | "due" | "ordering" | "failing" | "backing-off" | "capped";

export interface RenewalView {
	certificate: string;
	issuer: string;
	/** The configured names (the certificate may not exist yet). */
	names: string[];
	state: RenewalState;
	/** The order this cycle placed, and how it ended. */
	order?: { result: "ok" | "failed"; reason: string; message: string };
	/** When the next order may be placed (ISO). */
	nextAttemptAt: string;
	/** The policy's reason and message for that time, e.g. "Backoff: 2 failed order(s); retrying after 2m". */
	reason: string;
	message: string;
	failures: number;
	/** retryable false: retrying will not help (a permanent ACME problem); shown as needing a human. */
	lastError?: { code: string; message: string; hint?: string; retryable?: boolean };
	serial?: string;
	notAfter?: string;
	/** The ACME profile it was issued under. */
	profile?: string;
}
