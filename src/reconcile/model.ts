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
 * How HAProxy makes a ref live: a crt directory (`crt <dir>`), a crt-list line, a crt-store `load` (3.0+,
 * named `@store/alias`), an `ssl-f-use` line (3.2+, in the frontend's implicit crt-list `@<frontend>`), or a
 * direct `crt <file>` on a bind line.
 */
export type PlacementVia = "crt-dir" | "crt-list" | "crt-store" | "ssl-f-use" | "crt";

/** Companion files HAProxy loads beside a certificate file X (`ssl-load-extra-files`): X.key, X.ocsp, ... */
export type ExtraFile = "key" | "ocsp" | "issuer" | "sctl";

/**
 * Where a ref lives on the node's disk, as learnt from the runtime API (3.x `Crt filename`/`Key filename`,
 * `@store/alias` names, the `@<frontend>` crt-list of ssl-f-use, `acme status`) and, where it says nothing,
 * from the files themselves and the target's configuration: never from a file name alone. Kind-neutral: a
 * driver fills it, placement.ts turns it into the files of a write.
 */
export interface Placement {
	via: PlacementVia;
	/** Absolute path of the certificate file; absent when certificatee cannot tell it (`unknown` says why). */
	certFile?: string;
	/**
	 * The key, when not inside certFile: `argument` (a `key` keyword of a crt-store load or ssl-f-use line,
	 * which overrides a key inside the crt file) or `companion` (X.key, loaded only when X holds no key).
	 */
	key?: { file: string; by: "argument" | "companion" };
	/** Companion files that exist beside certFile (absolute paths), the key companion included when present. */
	extras: Partial<Record<ExtraFile, string>>;
	/** HAProxy's own ACME client manages it (3.2+): its `acme` section. Observed and reported, never written. */
	acme?: string;
	/** Why certificatee cannot write it in place (its files are unknown): it is observed, never written. */
	unknown?: string;
	/**
	 * With `unknown`, when the cause is the configuration HAProxy runs (runtime target's haproxy_config): the
	 * refusal's code and what to do, naming the file and line. Without it the refusal is PLACEMENT_UNKNOWN.
	 */
	unknownAs?: { code: "HAPROXY_CONFIG_INVALID" | "HAPROXY_CONFIG_MISMATCH"; hint: string };
}

/**
 * The files of one storage write, in the order they are made live, as placement.ts plans them: each file
 * gets a part of the bundle. `removeFirst`: companions stale for the new certificate (its OCSP response, its
 * SCTs), removed before it is written; `removeAfter`: a key left beside a combined PEM, removed after. With
 * more than one file the write is a pair: see the driver.
 */
export interface PlacedWrite {
	files: Array<{ path: string; part: "combined" | "certificates" | "key" }>;
	removeFirst: string[];
	removeAfter: string[];
	/** Every intermediate state of the renames loads (the key is a companion): a journal only finishes the layout. */
	safeOrder: boolean;
}

/** A storage directory as HAProxy names it (`crt <dir>` lists it so): without trailing slashes. */
export function storageDirName(dir: string): string {
	return dir.replace(/\/+$/, "");
}

/** HAProxy's runtime name for a ref in a storage directory: the path it loaded (or would load) the file by. */
export function runtimeNameOf(storageDir: string, ref: string): string {
	return `${storageDirName(storageDir)}/${ref}`;
}

/** One certificate file/store entry on an endpoint, as observed in phase 1. */
export interface ObservedRef {
	/** The storage name certificatee addresses it by (the Data Plane API's sanitised name, e.g. "example_com.pem"). */
	ref: string;
	/** HAProxy's runtime name for it (usually the absolute path), when known. */
	runtimeName?: string;
	/** Present when the storage file exists. */
	storage?: RefMeta;
	/** Present when HAProxy's runtime listing holds it. */
	runtime?: RefMeta;
	/** Runtime crt-lists (or crt directories, named without trailing slash) that reference it. */
	crtLists: string[];
	/** Set when the target cannot address the storage file by its name: a request would reach `addressedAs`. */
	unaddressable?: { addressedAs: string };
	/**
	 * Set for a certificate HAProxy holds from outside the target's storage directory (a `crt` line or a
	 * crt-list naming another path): observed so the plan knows who serves a name, never written or removed.
	 */
	external?: string;
	/** Where it lives and how HAProxy makes it live, when the driver knows (haproxy-runtime). */
	placement?: Placement;
}

/**
 * A crt-list HAProxy has loaded. A crt directory (`crt <dir>`, named by the directory) is not a file: a
 * reload loads whatever the directory holds. A crt-list file is re-read at every reload, so a runtime
 * `add`/`del ssl crt-list` lasts only if the file says the same.
 */
export interface ObservedCrtList {
	name: string;
	kind: "file" | "directory";
	/** The target edits this file itself (atomically); otherwise changes to it are reported for the operator. */
	editable: boolean;
	/** The file's lines naming each certificate (by HAProxy's runtime name), as far as the target can see them. */
	lines?: Record<string, string[]>;
	/** Lines of the file naming a certificate file that does not exist: HAProxy's next reload fails on them. */
	unresolved?: Array<{ line: number; file: string }>;
}

export type EndpointObservation =
	| {
			endpoint: string;
			ok: true;
			refs: ObservedRef[];
			observedAt: Date;
			info?: Record<string, string>;
			/** Every crt-list HAProxy reports, with what the target can do with it. */
			crtLists?: ObservedCrtList[];
	  }
	| { endpoint: string; ok: false; error: CertificateeError };

/** A single write on one HAProxy endpoint (a storage file, HAProxy's memory, a crt-list). */
export type HaproxyAction =
	/** `files`: the ref's own files (placement.ts); absent: one combined PEM named `ref` in the storage directory. */
	| { op: "storage-replace"; ref: string; certificate: string; bundle: Bundle; files?: PlacedWrite }
	| { op: "storage-create"; ref: string; certificate: string; bundle: Bundle }
	| {
			op: "runtime-set";
			ref: string;
			runtimeName: string;
			certificate: string;
			bundle: Bundle;
			/**
			 * The file already holds this certificate: HAProxy's memory is brought level with it (a stop or another
			 * writer left storage ahead). Not refused for dropped names: a reload would serve the file anyway.
			 */
			followsStorage?: true;
	  }
	| {
			op: "runtime-add";
			ref: string;
			runtimeName: string;
			crtList: string;
			certificate: string;
			bundle: Bundle;
	  }
	| { op: "crt-list-remove"; ref: string; runtimeName: string; crtList: string }
	/** Edits a crt-list file on disk (memory is `runtime-add` / `crt-list-remove`): append or remove its lines. */
	| { op: "crt-list-file-add"; ref: string; runtimeName: string; crtList: string }
	| { op: "crt-list-file-remove"; ref: string; runtimeName: string; crtList: string }
	/**
	 * Commit a ref again with the content HAProxy holds, so its SNI entries go behind a keeper just written.
	 * `files`: where that content lives (the ref's placement: its certificate file, its key file when separate);
	 * absent: one combined PEM named `ref` in the storage directory (or its absolute path).
	 */
	| { op: "runtime-reinsert"; ref: string; runtimeName: string; files?: { cert: string; key?: string } }
	| { op: "runtime-delete"; ref: string; runtimeName: string }
	| { op: "storage-delete"; ref: string };

/**
 * A single write of a directory target (its ref is the set's path): publish a certificate's files as one set,
 * or run the target's on_change command for it.
 */
export type DirectoryAction =
	| { op: "directory-write"; ref: string; certificate: string; bundle: Bundle }
	| { op: "on-change"; ref: string; certificate: string };

/** Every write any target performs. Phase 3 runs an endpoint's actions in order. */
export type Action = HaproxyAction | DirectoryAction;

export type ActionOp = Action["op"];

/** One write and why (`why` is shown in plans). HAProxy endpoints plan HaproxyActions; a kind may plan its own. */
export interface PlannedStep<A extends Action = HaproxyAction> {
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

/**
 * One HAProxy node, reached through the Data Plane API or the runtime socket.
 * observe() lists every ref with its live metadata (storage and runtime) before anything is decided;
 * apply() performs one write and reports what happened as a value (it throws only on programming errors);
 * probe() completes a TLS handshake by SNI at the endpoint's probe address (undefined when none is configured).
 */
export interface EndpointDriver {
	readonly name: string;
	/** Can perform `runtime-reinsert` (it can read the content HAProxy holds: the runtime target's local files). */
	readonly reinserts?: boolean;
	observe(signal: AbortSignal): Promise<EndpointObservation>;
	apply(action: HaproxyAction, signal: AbortSignal): Promise<ActionResult>;
	/**
	 * Performs several independent actions on distinct refs, each of an op in `batches`, at once (see
	 * targets/haproxy/engine/batches.ts): results in the same order, each as apply() would report it. Absent: one apply() at a time.
	 */
	applyBatch?(actions: readonly HaproxyAction[], signal: AbortSignal): Promise<ActionResult[]>;
	/** The ops applyBatch() takes. */
	readonly batches?: ReadonlySet<HaproxyAction["op"]>;
	/** The worker that answers now, as an observation's `info` names it (`pid`, `uptime_sec`, `node`): a cheap look. */
	worker?(): Promise<Record<string, string>>;
	/** keyType: shake hands as a client of that key type (HAProxy picks among a name's certificates by it). */
	probe?(sni: string, signal: AbortSignal, keyType?: "rsa" | "ec" | "ec-only"): Promise<ServedCertificate>;
	/**
	 * Reloads HAProxy (master CLI, or the API's forced reload) and says whether a new worker answers; absent when
	 * the target cannot. `written`: the refs the reload is for, each already on disk with this content.
	 */
	reload?(
		signal: AbortSignal,
		written: ReadonlyArray<{ ref: string; bundle: Bundle }>,
	): Promise<ReloadOutcome>;
}

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
