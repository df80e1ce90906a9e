/**
 * What the HAProxy engine works on, HAProxy's words only: where a ref lives and how HAProxy makes it live
 * (placement), what an endpoint holds (observation), the writes on it (HaproxyAction) and the driver that does
 * them. A new HAProxy layout changes this file, not the core's model (../../../reconcile/model.ts). No I/O here.
 */
import type { Bundle } from "../../../certificates/types.js";
import type { CertificateeError } from "../../../errors.js";
import type { ActionResult, PlannedStep, RefMeta, ServedProbe } from "../../../reconcile/model.js";

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
	/**
	 * HAProxy holds signed certificate timestamps for it: an `.sctl` file beside it, loaded at HAProxy's start
	 * (the runtime API cannot say: 3.2+ print an `SCTL filename` for every certificate, loaded or not). HAProxy
	 * 2.6-3.4 crash on a runtime update of such a certificate.
	 */
	sctlLoaded?: true;
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

/** One HAProxy write and why. */
export type HaproxyStep = PlannedStep<HaproxyAction>;

/** How an asked-for reload ended: ok once a new worker answers; never hidden. */
export type ReloadOutcome =
	| { ok: true; from?: number; to?: number; detail: string }
	| { ok: false; error: CertificateeError };

/**
 * One HAProxy node, reached through the Data Plane API or the runtime socket.
 * observe() lists every ref with its live metadata (storage and runtime) before anything is decided;
 * apply() performs one write and reports what happened as a value (it throws only on programming errors);
 * probe() completes a TLS handshake by SNI at the endpoint's probe address (undefined when none is configured).
 */
/** What a cycle tells an endpoint's observation. */
export interface ObserveLook {
	/**
	 * The cycle's desired set as desiredKey() digests it: a driver that observes incrementally defers a scheduled
	 * full observation, once, when it changed since its last observation (full-schedule.ts).
	 */
	desired?: string;
}

export interface EndpointDriver {
	readonly name: string;
	/** Can perform `runtime-reinsert` (it can read the content HAProxy holds: the runtime target's local files). */
	readonly reinserts?: boolean;
	observe(signal: AbortSignal, look?: ObserveLook): Promise<EndpointObservation>;
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
	probe?: ServedProbe;
	/**
	 * Reloads HAProxy (master CLI, or the API's forced reload) and says whether a new worker answers; absent when
	 * the target cannot. `written`: the refs the reload is for, each already on disk with this content.
	 */
	reload?(
		signal: AbortSignal,
		written: ReadonlyArray<{ ref: string; bundle: Bundle }>,
	): Promise<ReloadOutcome>;
}
