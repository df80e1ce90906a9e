/**
 * The `haproxy-dataplane` target: one EndpointDriver per Data Plane API server. observe() reads storage,
 * runtime and crt-lists in full before anything is decided; apply() performs one action and reports what
 * happened; probe() shakes hands with HAProxy's TLS port by SNI when the endpoint has a `probe` address.
 */

import { CertificateeError, isCertificateeError } from "../../errors.js";
import { probeServed } from "../../probe/index.js";
import type { EndpointDriver, EndpointObservation } from "../../reconcile/model.js";
import { applyAction } from "./apply.js";
import { type ClientDeps, createDataplaneClient, type DataplaneClientHandle } from "./client.js";
import { observeEndpoint } from "./observe.js";
import type { DataplaneEndpointConfig } from "./schema.js";

export { sanitizeStorageName } from "./client.js";
export {
	type DataplaneEndpointConfig,
	type DataplaneTargetConfig,
	dataplaneEndpointSchema,
	dataplaneTargetSchema,
} from "./schema.js";

export interface DataplaneEndpointDeps extends ClientDeps {
	now(): Date;
	/** The target's allow_name_removal (default false). */
	allowNameRemoval?: boolean;
	/** GETs in flight during observe(). Default 8. */
	concurrency?: number;
	/** The target's storage_dir as haproxy.cfg spells it: the crt directory whose members the API cannot list. */
	storageDir?: string;
	/** HAProxy's tune.bufsize (default 16384). */
	bufsize?: number;
}

export interface DataplaneEndpoint extends EndpointDriver {
	/** Closes the endpoint's connections. */
	close(): Promise<void>;
}

export function createDataplaneEndpoint(
	config: DataplaneEndpointConfig,
	deps: DataplaneEndpointDeps,
): DataplaneEndpoint {
	const client: DataplaneClientHandle = createDataplaneClient(config, deps);
	const endpoint = config.name;
	const concurrency = deps.concurrency ?? 8;

	async function observe(signal: AbortSignal): Promise<EndpointObservation> {
		try {
			// The worker first: a reload during the observation then shows as a change at the next look.
			const worker = await workerInfo(signal);
			const [{ refs, crtLists }, info] = await Promise.all([
				observeEndpoint(
					client,
					{ concurrency, ...(deps.storageDir ? { storageDir: deps.storageDir } : {}) },
					signal,
				),
				client.info(signal),
			]);
			const version = info.api?.version;
			const fields = { ...(version ? { api_version: version } : {}), ...worker };
			return {
				endpoint,
				ok: true,
				refs,
				crtLists,
				observedAt: deps.now(),
				...(Object.keys(fields).length > 0 ? { info: fields } : {}),
			};
		} catch (e) {
			if (e instanceof CertificateeError && !signal.aborted) return { endpoint, ok: false, error: e };
			throw e;
		}
	}

	/** pid, uptime_sec and node of the worker the API reaches; none from a server without runtime info. */
	async function workerInfo(signal: AbortSignal): Promise<Record<string, string>> {
		const answer = await client.processInfo(signal).catch((e: unknown) => {
			if (isCertificateeError(e, "ENDPOINT_NOT_FOUND")) return undefined;
			throw e;
		});
		const info = answer?.info;
		if (typeof info?.pid !== "number" || typeof info.uptime !== "number") return {};
		return {
			pid: String(info.pid),
			uptime_sec: String(info.uptime),
			...(info.node ? { node: info.node } : {}),
		};
	}

	const driver: DataplaneEndpoint = {
		name: endpoint,
		observe,
		apply: (action, signal) =>
			applyAction(
				{
					endpoint,
					client,
					now: deps.now,
					allowNameRemoval: deps.allowNameRemoval ?? false,
					...(deps.bufsize ? { bufsize: deps.bufsize } : {}),
					...(deps.warn ? { warn: deps.warn } : {}),
				},
				action,
				signal,
			),
		close: () => client.close(),
	};
	const address = config.probe;
	if (address !== undefined) {
		driver.probe = (sni, signal, keyType) =>
			probeServed({ address, sni, signal, timeoutMs: config.timeout, ...(keyType ? { keyType } : {}) });
	}
	return driver;
}
