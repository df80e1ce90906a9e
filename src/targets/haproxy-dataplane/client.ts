/**
 * Data Plane API v3 client for certificates: storage files (storage-api.ts), HAProxy's runtime store
 * (runtime-api.ts), runtime crt-lists (crt-list-api.ts), runtime maps (maps-api.ts) and /info. Status codes
 * are read as the server really sends them (docs/haproxy-dataplane-target.md), every body is validated, and certificate
 * writes to one endpoint go one at a time (calls.ts).
 */
import { createApiCalls } from "./calls.js";
import { type CrtListApi, createCrtListApi } from "./crt-list-api.js";
import { type CrtStoreApi, createCrtStoreApi } from "./crt-store-api.js";
import { createHttpClient, defaultRetryPolicy, type HttpClient, type HttpDeps } from "./http.js";
import { createMapsApi, type MapsApi } from "./maps-api.js";
import { createRuntimeApi, type RuntimeApi } from "./runtime-api.js";
import {
	type DataplaneEndpointConfig,
	type DataplaneInfo,
	infoSchema,
	type ProcessInfo,
	processInfoSchema,
} from "./schema.js";
import { createStorageApi, type StorageApi } from "./storage-api.js";

export { sanitizeStorageName } from "../haproxy/naming.js";
export type { ReloadCaused } from "./calls.js";
export type { CrtListApi, NewCrtListEntry } from "./crt-list-api.js";
export type { CrtStoreApi } from "./crt-store-api.js";
export type { MapsApi } from "./maps-api.js";
export type { RuntimeApi } from "./runtime-api.js";
export type { StorageApi, StorageItem, StorageWrite } from "./storage-api.js";

export interface DataplaneClient {
	readonly storage: StorageApi;
	readonly runtime: RuntimeApi;
	readonly crtLists: CrtListApi;
	/** crt-store sections and their loads (configuration, read only). */
	readonly crtStores: CrtStoreApi;
	readonly maps: MapsApi;
	info(signal: AbortSignal): Promise<DataplaneInfo>;
	/** The HAProxy worker the API's runtime client reaches (pid, uptime, node). */
	processInfo(signal: AbortSignal): Promise<ProcessInfo>;
}

export interface DataplaneClientHandle extends DataplaneClient {
	close(): Promise<void>;
}

export interface ClientDeps extends Partial<HttpDeps> {
	/** Told once at creation when verification is off. */
	warn?: (fields: Record<string, unknown>, message: string) => void;
}

export function createDataplaneClient(
	config: DataplaneEndpointConfig,
	deps: ClientDeps = {},
): DataplaneClientHandle {
	if (config.insecure_skip_verify) {
		deps.warn?.(
			{ endpoint: config.name },
			"insecure_skip_verify is set: the Data Plane API's HTTPS certificate is not verified",
		);
	}
	const http = httpClientFor(config, deps);
	const calls = createApiCalls(config.name, http);
	return {
		storage: createStorageApi(calls),
		runtime: createRuntimeApi(calls),
		crtLists: createCrtListApi(calls),
		crtStores: createCrtStoreApi(calls),
		maps: createMapsApi(calls),
		info: (signal) => calls.read("getInfo", "/info", infoSchema, signal),
		processInfo: (signal) =>
			calls.read("getHaproxyProcessInfo", "/services/haproxy/runtime/info", processInfoSchema, signal),
		close: () => http.close(),
	};
}

function httpClientFor(config: DataplaneEndpointConfig, deps: ClientDeps): HttpClient {
	return createHttpClient(
		{
			endpoint: config.name,
			url: config.url,
			username: config.username,
			password: config.password,
			...(config.ca_file === undefined ? {} : { caFile: config.ca_file }),
			insecureSkipVerify: config.insecure_skip_verify,
			timeoutMs: config.timeout,
			maxResponseBytes: config.max_response_size,
		},
		{
			sleep: deps.sleep ?? defaultSleep,
			random: deps.random ?? Math.random,
			retry: deps.retry ?? defaultRetryPolicy,
		},
	);
}

function defaultSleep(ms: number, signal: AbortSignal): Promise<void> {
	return new Promise((resolve, reject) => {
		if (signal.aborted) return reject(signal.reason);
		const timer = setTimeout(() => {
			signal.removeEventListener("abort", onAbort);
			resolve();
		}, ms);
		const onAbort = () => {
			clearTimeout(timer);
			reject(signal.reason);
		};
		signal.addEventListener("abort", onAbort, { once: true });
	});
}
