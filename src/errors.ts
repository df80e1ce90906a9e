/**
 * One error type for the whole program. Callers branch on `code`, never on the message.
 * Messages name the file, field or endpoint and never contain key material; `hint` says what to do.
 */
export const ERROR_CODES = [
	// configuration
	"CONFIG_NOT_FOUND",
	"CONFIG_INVALID",
	"CONFIG_SECRET_UNREADABLE",
	/** A secret file another account can read (issue 25, finding 12): refused, like ssh refuses such a key. */
	"CONFIG_SECRET_EXPOSED",
	// certificate bundles
	"BUNDLE_EMPTY",
	"BUNDLE_TOO_LARGE",
	"BUNDLE_NOT_PEM",
	"BUNDLE_TRUNCATED",
	"BUNDLE_NO_CERTIFICATE",
	"BUNDLE_NO_KEY",
	"BUNDLE_SEVERAL_KEYS",
	"BUNDLE_ENCRYPTED_KEY",
	"BUNDLE_BAD_KEY",
	"BUNDLE_BAD_CERTIFICATE",
	"BUNDLE_KEY_MISMATCH",
	"BUNDLE_SEVERAL_LEAVES",
	"BUNDLE_CHAIN_BROKEN",
	"BUNDLE_EXPIRED",
	"BUNDLE_NOT_YET_VALID",
	"BUNDLE_NAMES_NOT_COVERED",
	// endpoints and targets
	"ENDPOINT_UNAVAILABLE",
	"ENDPOINT_TIMEOUT",
	/** An answer larger than the endpoint's max_response_size: not read further (issue 25, finding 3). */
	"ENDPOINT_RESPONSE_TOO_LARGE",
	/** The endpoint's whole cycle (observe, writes, probes) overran the target's endpoint_deadline. */
	"ENDPOINT_DEADLINE",
	"ENDPOINT_AUTH",
	"ENDPOINT_BAD_RESPONSE",
	"ENDPOINT_NOT_FOUND",
	"ENDPOINT_CONFLICT",
	"ENDPOINT_ERROR",
	"RUNTIME_COMMAND_FAILED",
	/** HAProxy refused `del ssl cert`: a crt-list, crt directory or `crt` line still uses the certificate. */
	"RUNTIME_CERT_IN_USE",
	/** The Data Plane API (client-native) refuses to read a runtime certificate whose key is a separate file (3.2+). */
	"RUNTIME_SEPARATE_KEY",
	"RUNTIME_LOCKED",
	"RUNTIME_PAYLOAD_TOO_LARGE",
	"RUNTIME_RELOADED",
	// reloads (docs/reloads.md)
	"RELOAD_DISABLED",
	"RELOAD_BUDGET_EXHAUSTED",
	"RELOAD_BREAKER_OPEN",
	"RELOAD_WRITES_NOT_DURABLE",
	"RELOAD_FAILED",
	"PROBE_FAILED",
	/** A certificate with an IP address is not what a client without SNI gets: it is not the bind's default. */
	"IP_NOT_DEFAULT_CERTIFICATE",
	"UPDATE_DROPS_NAMES",
	/** never_downgrade: the live certificate expires later than the one to push; it is kept (docs/cluster.md). */
	"UPDATE_WOULD_DOWNGRADE",
	"MANAGED_BY_HAPROXY_ACME",
	"PLACEMENT_UNKNOWN",
	"SCTL_HOT_SWAP_UNSAFE",
	/** haproxy_config (runtime target) cannot be read, or a line certificatee reads does not parse. */
	"HAPROXY_CONFIG_INVALID",
	/**
	 * haproxy_config and what the running HAProxy holds disagree about a certificate (its files, its crt-store,
	 * its load line), or haproxy_config and the target's crt_stores do: that ref is never written.
	 */
	"HAPROXY_CONFIG_MISMATCH",
	"NEW_CERTIFICATE_NEEDS_CONFIG",
	"CRT_LIST_LINE_UNRESOLVED",
	"REF_UNADDRESSABLE",
	// files and state
	"ATOMICDIR_BAD_NAME",
	"ATOMICDIR_UNSUPPORTED",
	"ATOMICDIR_SWAP_FAILED",
	"ATOMICDIR_CLEANUP_FAILED",
	"ATOMICDIR_LOCKED",
	/** Another account can write the directory certificatee would create names in (issue 25, finding 1). */
	"ATOMICDIR_UNSAFE_PARENT",
	"STATE_LOCKED",
	/** The state directory cannot be created or written by this user (permissions, a read-only mount). */
	"STATE_UNWRITABLE",
	"STATE_CONFLICT",
	/** A pre-existing state_dir other accounts can write (issue 25, finding 12). */
	"STATE_EXPOSED",
	"STATE_CORRUPT",
	// cluster (docs/cluster.md)
	/** etcd could not be reached or did not answer within the deadline. */
	"CLUSTER_UNAVAILABLE",
	/** A write was refused because this member no longer holds the leadership or shard it wrote under. */
	"CLUSTER_FENCED",
	/** A value read from etcd could not be decrypted (wrong `encryption_key_file`) or parsed. */
	"CLUSTER_BAD_VALUE",
	// sources and issuers
	"SOURCE_UNREADABLE",
	"SOURCE_OLDER",
	"SOURCE_DUPLICATE_NAME",
	"ACME_ERROR",
	"ISSUE_FAILED",
	"HOOK_FAILED",
	"DNS_UPDATE_FAILED",
	"NOT_AVAILABLE",
	"INTERNAL",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** Where an error happened: whichever of these apply. Never key material. */
export interface ErrorContext {
	file?: string;
	field?: string;
	endpoint?: string;
	target?: string;
	ref?: string;
	certificate?: string;
	operation?: string;
	status?: number;
	/** ACME problem type from the CA (RFC 8555 §6.7), e.g. "urn:ietf:params:acme:error:rejectedIdentifier". */
	problem?: string;
}

export interface ErrorOptions {
	context?: ErrorContext;
	hint?: string;
	retryable?: boolean;
	cause?: unknown;
}

export class CertificateeError extends Error {
	override readonly name = "CertificateeError";
	readonly code: ErrorCode;
	readonly context: ErrorContext;
	readonly hint: string | undefined;
	readonly retryable: boolean;

	constructor(code: ErrorCode, message: string, options: ErrorOptions = {}) {
		super(scrubSecrets(message), options.cause === undefined ? undefined : { cause: options.cause });
		this.code = code;
		this.context = options.context ?? {};
		this.hint = options.hint;
		this.retryable = options.retryable ?? false;
	}

	/** JSON-safe form for logs, plans and `--json` output. */
	toJSON(): Record<string, unknown> {
		return {
			code: this.code,
			message: this.message,
			...this.context,
			hint: this.hint,
			retryable: this.retryable,
		};
	}
}

/** A secret file that is too open (secretFileExposure's text), refused. */
export function exposedSecret(file: string, field: string, why: string): CertificateeError {
	return new CertificateeError("CONFIG_SECRET_EXPOSED", why, {
		context: { file, field },
		hint: `chmod 600 ${file} (or chown root:<certificatee's group> and chmod 640): only certificatee's user may read a secret`,
	});
}

export function isCertificateeError(e: unknown, code?: ErrorCode): e is CertificateeError {
	return e instanceof CertificateeError && (code === undefined || e.code === code);
}

/** An error as reports, plans and `--json` output show it: code, message and hint only. */
export interface ErrorView {
	code: ErrorCode;
	message: string;
	hint?: string;
}

export function errorView(e: { code: ErrorCode; message: string; hint?: string | undefined }): ErrorView {
	return { code: e.code, message: e.message, ...(e.hint ? { hint: e.hint } : {}) };
}

const PEM_BLOCK = /-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)/g;
// A run of base64 long enough to be part of a key or certificate, even without its armour (the Data Plane
// API echoes socket commands, sometimes cut into lines). One line is enough: the first body line of a SEC1
// P-256 key holds the whole private scalar, and a TSIG secret is 44 characters. Kept: hex (serials,
// fingerprints) and what reads as a path or a word list (no digit, or no capital, or no small letter).
const BASE64_RUN = /[A-Za-z0-9+/]{40,}={0,2}/g;
// `password=…`, `"token": "…"`, `secret: …`, `Authorization: Basic …`/`Bearer …`: the value goes.
const SECRET_ASSIGNMENT =
	/\b(password|passwd|pass|secret|token|api[_-]?key|hmac[_-]?key|eab_hmac_key|private[_-]?key)("?\s*[:=]\s*"?)([^\s"'&,;[][^\s"'&,;]*)/gi;
const AUTHORIZATION = /\b(Basic|Bearer)\s+[A-Za-z0-9+/._~-]+=*/g;

/**
 * Every secret value the configuration loaded (passwords, tokens, HMAC keys, the TSIG secret, the cluster's
 * encryption key): scrubbed by value wherever it appears, whatever its shape. One registry for the process,
 * filled by the loaders (config/interpolate.ts, sources/acme/rfc2136.ts, cluster/encryption.ts).
 */
const KNOWN_SECRETS = new Set<string>();
/** Shorter values are too likely to be ordinary words ("admin") to be cut out of every message. */
const MIN_KNOWN_SECRET = 6;

/** Remembers a secret value (and its base64 and hex forms for binary keys) so that no message carries it. */
export function rememberSecret(value: string | Buffer): void {
	const forms =
		typeof value === "string"
			? [value]
			: [value.toString("base64"), value.toString("hex"), value.toString("base64url")];
	for (const form of forms) if (form.length >= MIN_KNOWN_SECRET) KNOWN_SECRETS.add(form);
}

function looksLikeBase64(run: string): boolean {
	if (/^[0-9a-fA-F]+$/.test(run)) return false;
	return /[0-9]/.test(run) && /[A-Z]/.test(run) && /[a-z]/.test(run);
}

/**
 * Removes known secret values, PEM blocks, long base64 runs, `password=…`-style values and Authorization
 * credentials from text that came from outside (endpoint bodies, stderr) or goes out (errors, logs).
 */
export function scrubSecrets(text: string): string {
	let out = text;
	for (const secret of KNOWN_SECRETS)
		if (out.includes(secret)) out = out.split(secret).join("[secret removed]");
	return out
		.replace(PEM_BLOCK, "[PEM removed]")
		.replace(AUTHORIZATION, "$1 [secret removed]")
		.replace(SECRET_ASSIGNMENT, "$1$2[secret removed]")
		.replace(BASE64_RUN, (run) => (looksLikeBase64(run) ? "[base64 removed]" : run));
}

/** The message of any thrown value, scrubbed. */
export function describeError(e: unknown): string {
	if (e instanceof Error) return scrubSecrets(e.message);
	return scrubSecrets(String(e));
}
