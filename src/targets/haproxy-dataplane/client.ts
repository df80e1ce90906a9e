/**
 * Data Plane API v3 client for certificates: storage files, HAProxy's runtime store, runtime crt-lists
 * and /info. Status codes are read as the server really sends them (research/dpapi.md), every body is
 * validated, and certificate writes to one endpoint go one at a time.
 */
import { randomBytes } from "node:crypto";
import pLimit from "p-limit";
import type { z } from "zod";
import { CertificateeError } from "../../errors.js";
import { apiAddressable, sanitizeStorageName } from "../haproxy/naming.js";
import { saysInUse } from "../haproxy/refusals.js";
import {
	createHttpClient,
	defaultRetryPolicy,
	type Exchange,
	expectEmpty,
	type HttpDeps,
	header,
	parseBody,
	type Reply,
} from "./http.js";
import {
	type CrtListEntry,
	crtListEntriesSchema,
	crtListsSchema,
	type DataplaneEndpointConfig,
	type DataplaneInfo,
	infoSchema,
	type MapEntry,
	mapEntriesSchema,
	mapEntrySchema,
	type ProcessInfo,
	processInfoSchema,
	runtimeListSchema,
	type SslCertificate,
	sslCertificateSchema,
	storageListSchema,
} from "./schema.js";

/** A write that made the server schedule (or run) a reload: 202 with a Reload-ID header. */
export interface ReloadCaused {
	reloadId?: string;
}

export interface StorageWrite {
	certificate: SslCertificate;
	reload?: ReloadCaused;
}

export interface StorageItem {
	storageName: string;
	/** Absolute path on the API host, when the server reports it. */
	file?: string;
}

export interface NewCrtListEntry {
	file: string;
	ssl_bind_config?: string;
	sni_filter?: string[];
}

/** Storage files in the API's ssl-certs-dir. Writes always pass skip_reload=true. Names are sanitised by the server. */
export interface StorageApi {
	list(signal: AbortSignal): Promise<StorageItem[]>;
	/** Metadata of one file (serial is decimal here). Missing: ENDPOINT_NOT_FOUND. get, replace and delete refuse
	 * a name the server would sanitise (REF_UNADDRESSABLE), without sending anything. */
	get(name: string, signal: AbortSignal): Promise<SslCertificate>;
	/** Existing name: ENDPOINT_CONFLICT. The answer's storage_name is the name the server really used. */
	create(name: string, pem: string, signal: AbortSignal): Promise<StorageWrite>;
	/** Never creates: a missing file is ENDPOINT_NOT_FOUND. */
	replace(name: string, pem: string, signal: AbortSignal): Promise<StorageWrite>;
	delete(name: string, signal: AbortSignal): Promise<{ reload?: ReloadCaused }>;
}

/** HAProxy's in-memory certificate store, by HAProxy's name (usually the absolute path). Errors arrive as 500. */
export interface RuntimeApi {
	list(signal: AbortSignal): Promise<string[]>;
	/** Serial is uppercase hex here. Unknown name: ENDPOINT_NOT_FOUND. */
	get(name: string, signal: AbortSignal): Promise<SslCertificate>;
	/** The server keeps only the basename of `name` (dataplaneapi #379). */
	create(name: string, pem: string, signal: AbortSignal): Promise<void>;
	replace(name: string, pem: string, signal: AbortSignal): Promise<void>;
	delete(name: string, signal: AbortSignal): Promise<void>;
}

/** Runtime crt-lists (crt directories are listed as crt-lists named without trailing slash). */
export interface CrtListApi {
	lists(signal: AbortSignal): Promise<string[]>;
	entries(list: string, signal: AbortSignal): Promise<CrtListEntry[]>;
	add(list: string, entry: NewCrtListEntry, signal: AbortSignal): Promise<void>;
	delete(list: string, certFile: string, lineNumber: number | undefined, signal: AbortSignal): Promise<void>;
}

/**
 * HAProxy's runtime maps, by the API's map name: the file's basename without `.map`, resolved in the API's
 * maps_dir (client-native GetMapsPath). Never with force_sync: nothing reaches the file on disk.
 */
export interface MapsApi {
	entries(map: string, signal: AbortSignal): Promise<MapEntry[]>;
	/** An existing key: ENDPOINT_CONFLICT (client-native looks it up first). */
	add(map: string, key: string, value: string, signal: AbortSignal): Promise<void>;
	/** A missing key: ENDPOINT_NOT_FOUND. */
	delete(map: string, key: string, signal: AbortSignal): Promise<void>;
	/** `clear map`: every entry (the file stays). */
	clear(map: string, signal: AbortSignal): Promise<void>;
}

export interface DataplaneClient {
	readonly storage: StorageApi;
	readonly runtime: RuntimeApi;
	readonly crtLists: CrtListApi;
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

export { sanitizeStorageName } from "../haproxy/naming.js";

/**
 * The server sanitises the `{name}` of storage GET, PUT and DELETE: a name the sanitiser changes addresses
 * another file (dpapi.md, Addendum 2). Such a request is never sent.
 */
function refuseUnaddressable(endpoint: string, operation: string, name: string): void {
	if (apiAddressable(name)) return;
	throw new CertificateeError(
		"REF_UNADDRESSABLE",
		`endpoint ${endpoint}: ${operation} of ${name} not sent: the Data Plane API would address it as ${sanitizeStorageName(name)}`,
		{
			context: { endpoint, operation, ref: name },
			hint: "rename the file on disk to a name the API keeps unchanged (letters, digits, _ and - before the extension) and reload HAProxy",
		},
	);
}

const STORAGE = "/services/haproxy/storage/ssl_certificates";
const RUNTIME = "/services/haproxy/runtime/ssl_certs";
const CRT_LISTS = "/services/haproxy/runtime/ssl_crt_lists";
const MAPS = "/services/haproxy/runtime/maps";

function multipart(filename: string, pem: string): { contentType: string; data: string } {
	const boundary = `certificatee-${randomBytes(12).toString("hex")}`;
	const safeName = filename.replace(/["\r\n]/g, "_");
	const data =
		`--${boundary}\r\n` +
		`Content-Disposition: form-data; name="file_upload"; filename="${safeName}"\r\n` +
		"Content-Type: text/plain\r\n\r\n" +
		`${pem}\r\n--${boundary}--\r\n`;
	return { contentType: `multipart/form-data; boundary=${boundary}`, data };
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
	const http = createHttpClient(
		{
			endpoint: config.name,
			url: config.url,
			username: config.username,
			password: config.password,
			...(config.ca_file === undefined ? {} : { caFile: config.ca_file }),
			insecureSkipVerify: config.insecure_skip_verify,
			timeoutMs: config.timeout,
		},
		{
			sleep: deps.sleep ?? defaultSleep,
			random: deps.random ?? Math.random,
			retry: deps.retry ?? defaultRetryPolicy,
		},
	);
	// HAProxy has one certificate transaction per process: never interleave two writes.
	const writeLock = pLimit(1);
	const endpoint = config.name;

	const json =
		<S extends z.ZodType>(exchange: Exchange, schema: S) =>
		(reply: Reply): z.output<S> =>
			parseBody(endpoint, exchange, reply, schema);
	const read = <S extends z.ZodType>(operation: string, path: string, schema: S, signal: AbortSignal) => {
		const exchange: Exchange = { operation, method: "GET", path, read: true };
		return http.call(exchange, json(exchange, schema), signal);
	};
	const write = <T>(exchange: Omit<Exchange, "read">, accept: (reply: Reply) => T, signal: AbortSignal) =>
		writeLock(() => http.call({ ...exchange, read: false }, accept, signal));
	const reloadOf = (reply: Reply): ReloadCaused | undefined => {
		if (reply.status !== 202) return undefined;
		const id = header(reply, "reload-id");
		return id === undefined ? {} : { reloadId: id };
	};
	const storageWrite =
		(exchange: Exchange) =>
		(reply: Reply): StorageWrite => {
			const certificate = parseBody(endpoint, exchange, reply, sslCertificateSchema);
			const reload = reloadOf(reply);
			return reload === undefined ? { certificate } : { certificate, reload };
		};
	const named = (base: string, name: string) => `${base}/${encodeURIComponent(name)}`;
	// Runtime writes answer with an empty body; anything else (a proxy's HTML page) is not a v3 server's answer.
	const writeEmpty = (exchange: Omit<Exchange, "read">, signal: AbortSignal) =>
		write(exchange, (reply) => expectEmpty(endpoint, { ...exchange, read: false }, reply), signal);

	const storage: StorageApi = {
		list: async (signal) =>
			(await read("getAllStorageSSLCertificates", STORAGE, storageListSchema, signal)).map((item) => ({
				storageName: item.storage_name,
				...(item.file === undefined ? {} : { file: item.file }),
			})),
		get: async (name, signal) => {
			refuseUnaddressable(endpoint, "getOneStorageSSLCertificate", name);
			return read("getOneStorageSSLCertificate", named(STORAGE, name), sslCertificateSchema, signal);
		},
		create: (name, pem, signal) => {
			const exchange: Exchange = {
				operation: "createStorageSSLCertificate",
				method: "POST",
				path: `${STORAGE}?skip_reload=true`,
				body: multipart(name, pem),
				read: false,
			};
			return write(exchange, storageWrite(exchange), signal);
		},
		replace: async (name, pem, signal) => {
			refuseUnaddressable(endpoint, "replaceStorageSSLCertificate", name);
			const exchange: Exchange = {
				operation: "replaceStorageSSLCertificate",
				method: "PUT",
				path: `${named(STORAGE, name)}?skip_reload=true`,
				body: { contentType: "text/plain", data: pem },
				read: false,
			};
			return write(exchange, storageWrite(exchange), signal);
		},
		delete: async (name, signal) => {
			refuseUnaddressable(endpoint, "deleteStorageSSLCertificate", name);
			const exchange: Exchange = {
				operation: "deleteStorageSSLCertificate",
				method: "DELETE",
				path: `${named(STORAGE, name)}?skip_reload=true`,
				read: false,
			};
			return write(
				exchange,
				(reply) => {
					expectEmpty(endpoint, exchange, reply);
					const reload = reloadOf(reply);
					return reload === undefined ? {} : { reload };
				},
				signal,
			);
		},
	};

	const runtime: RuntimeApi = {
		list: async (signal) =>
			(await read("getAllCerts", RUNTIME, runtimeListSchema, signal)).map((item) => item.storage_name),
		get: (name, signal) => read("getCert", named(RUNTIME, name), sslCertificateSchema, signal),
		create: (name, pem, signal) =>
			writeEmpty(
				{ operation: "createCert", method: "POST", path: RUNTIME, body: multipart(name, pem) },
				signal,
			),
		replace: (name, pem, signal) =>
			writeEmpty(
				{ operation: "replaceCert", method: "PUT", path: named(RUNTIME, name), body: multipart(name, pem) },
				signal,
			),
		delete: (name, signal) =>
			writeEmpty(
				{
					operation: "deleteCert",
					method: "DELETE",
					path: named(RUNTIME, name),
					refusal: (message) => (saysInUse(message) ? "RUNTIME_CERT_IN_USE" : undefined),
				},
				signal,
			),
	};

	const listQuery = (list: string) => `name=${encodeURIComponent(list)}`;
	const crtLists: CrtListApi = {
		lists: async (signal) =>
			(await read("getAllCrtLists", CRT_LISTS, crtListsSchema, signal)).map((l) => l.file),
		entries: (list, signal) =>
			read("getAllCrtListEntries", `${CRT_LISTS}/entries?${listQuery(list)}`, crtListEntriesSchema, signal),
		add: (list, entry, signal) =>
			writeEmpty(
				{
					operation: "addCrtListEntry",
					method: "POST",
					path: `${CRT_LISTS}/entries?${listQuery(list)}`,
					body: { contentType: "application/json", data: JSON.stringify(entry) },
				},
				signal,
			),
		delete: (list, certFile, lineNumber, signal) => {
			const line = lineNumber === undefined ? "" : `&line_number=${lineNumber}`;
			return writeEmpty(
				{
					operation: "deleteCrtListEntry",
					method: "DELETE",
					path: `${CRT_LISTS}/entries?${listQuery(list)}&cert_file=${encodeURIComponent(certFile)}${line}`,
				},
				signal,
			);
		},
	};

	const mapPath = (map: string) => named(MAPS, map);
	const maps: MapsApi = {
		entries: (map, signal) => read("showRuntimeMap", `${mapPath(map)}/entries`, mapEntriesSchema, signal),
		add: async (map, key, value, signal) => {
			const exchange: Exchange = {
				operation: "addMapEntry",
				method: "POST",
				path: `${mapPath(map)}/entries`,
				body: { contentType: "application/json", data: JSON.stringify({ key, value }) },
				read: false,
			};
			await write(exchange, json(exchange, mapEntrySchema), signal);
		},
		delete: (map, key, signal) =>
			writeEmpty(
				{
					operation: "deleteRuntimeMapEntry",
					method: "DELETE",
					path: `${mapPath(map)}/entries/${encodeURIComponent(key)}`,
				},
				signal,
			),
		clear: (map, signal) =>
			writeEmpty({ operation: "clearRuntimeMap", method: "DELETE", path: mapPath(map) }, signal),
	};

	return {
		storage,
		runtime,
		crtLists,
		maps,
		info: (signal) => read("getInfo", "/info", infoSchema, signal),
		processInfo: (signal) =>
			read("getHaproxyProcessInfo", "/services/haproxy/runtime/info", processInfoSchema, signal),
		close: () => http.close(),
	};
}
