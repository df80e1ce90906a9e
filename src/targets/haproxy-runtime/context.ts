/**
 * What observe.ts and apply.ts of one haproxy-runtime endpoint share: its config, its client, how refs map
 * to HAProxy's names, the clock, and what the last observation learnt that a later write needs.
 */
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import type { ObservedCrtList } from "../haproxy/engine/model.js";
import type { HaproxyCfgCache } from "./haproxy-config.js";
import type { CertDetail, CrtListEntry } from "./parse.js";
import type { PlacementCache } from "./placement.js";
import type { RuntimeTargetConfig } from "./schema.js";
import type { RuntimeClient, WorkerIdentity } from "./socket.js";
import type { CrtDirCache } from "./storage.js";

export interface RuntimeContext {
	config: RuntimeTargetConfig;
	client: RuntimeClient;
	/** crt_dir as HAProxy names it (crt_dir_name, else crt_dir), without trailing slash. */
	dirName: string;
	/** HAProxy's name for a ref in crt_dir: `<dirName>/<ref>`. */
	runtimeName(ref: string): string;
	now(): Date;
	/** plan and status: observe() does not remove leftover temp files (it reports them). */
	readOnly: boolean;
	/** Parsed crt_dir files, reused while unchanged. */
	fileCache: CrtDirCache;
	/** Placed files outside crt_dir and key checks, reused while unchanged. */
	placementCache: PlacementCache;
	/** haproxy_config as last parsed, reused while its files are unchanged. */
	cfgCache: { entry?: HaproxyCfgCache };
	/** The crt-list files of the last observation: the files a storage delete must not leave naming a removed file. */
	crtListFiles: ObservedCrtList[];
	/** What the last observation read from HAProxy, for the next one to reuse where nothing can have changed. */
	memory?: ObservationMemory;
	/** What certificatee changed since the last observation (apply.ts notes it before each write). */
	touched: Touched;
	/** Where this endpoint's full-observation schedule starts (full-schedule.ts). */
	fullPhase: number;
}

/** HAProxy's side as the last observation read it (observe.ts). */
export interface ObservationMemory {
	worker: WorkerIdentity;
	/** `show ssl cert`: every store name. */
	names: ReadonlySet<string>;
	/** `show ssl crt-list`. */
	lists: readonly string[];
	/** `show ssl cert <name>` of every store observed (undefined: gone between listing and detail). */
	details: ReadonlyMap<string, CertDetail | undefined>;
	members: ReadonlyArray<{ list: string; entries: CrtListEntry[] }>;
	/** `acme status`: certificate name -> acme section. */
	acme: ReadonlyMap<string, string>;
	/** Observations since the last scheduled full one (the first counts from the endpoint's phase: full-schedule.ts). */
	sinceFull: number;
	/** desiredKey() of the desired set the observation was made for, when the cycle gave one. */
	desired?: string;
}

export interface Touched {
	/** Refs whose file in crt_dir certificatee wrote or removed. */
	files: Set<string>;
	/** Store names certificatee set or re-inserted. */
	names: Set<string>;
	/** Something else changed (a store added or deleted, a crt-list, a reload) or a write failed. */
	all: boolean;
}

export function untouched(): Touched {
	return { files: new Set(), names: new Set(), all: false };
}

/** Any failure as a CertificateeError naming the endpoint and the operation. */
export function endpointError(ctx: RuntimeContext, e: unknown, operation: string): CertificateeError {
	if (isCertificateeError(e)) return e;
	const { name } = ctx.config;
	return new CertificateeError("ENDPOINT_ERROR", `${name}: ${operation} failed: ${describeError(e)}`, {
		context: { endpoint: name, target: name, operation },
		cause: e,
	});
}
