/**
 * The `haproxy-dataplane` target: one EndpointDriver per Data Plane API server. observe() reads storage,
 * runtime and crt-lists in full before anything is decided; apply() performs one action and reports what
 * happened; probe() shakes hands with HAProxy's TLS port by SNI when the endpoint has a `probe` address.
 */

import { CertificateeError } from "../../errors.js";
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
			const [refs, info] = await Promise.all([
				observeEndpoint(client, concurrency, signal),
				client.info(signal),
			]);
			const version = info.api?.version;
			return {
				endpoint,
				ok: true,
				refs,
				observedAt: deps.now(),
				...(version ? { info: { api_version: version } } : {}),
			};
		} catch (e) {
			if (e instanceof CertificateeError && !signal.aborted) return { endpoint, ok: false, error: e };
			throw e;
		}
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
