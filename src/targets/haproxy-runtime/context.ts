/**
 * What observe.ts and apply.ts of one haproxy-runtime endpoint share: its config, its client, how refs map
 * to HAProxy's names, the clock, and what the last observation learnt that a later write needs.
 */
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import type { ObservedCrtList } from "../../reconcile/model.js";
import type { RuntimeTargetConfig } from "./schema.js";
import type { RuntimeClient } from "./socket.js";
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
	/** The crt-list files of the last observation: the files a storage delete must not leave naming a removed file. */
	crtListFiles: ObservedCrtList[];
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
