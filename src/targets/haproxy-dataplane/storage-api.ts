/**
 * Storage files in the API's ssl-certs-dir (`/services/haproxy/storage/ssl_certificates`). Writes always
 * pass skip_reload=true; a 202 is reported as the reload it caused. The server sanitises names.
 */
import { CertificateeError } from "../../errors.js";
import { apiAddressable, sanitizeStorageName } from "../haproxy/naming.js";
import { type ApiCalls, multipart, named, type ReloadCaused, reloadOf } from "./calls.js";
import { type Exchange, expectEmpty, parseBody, type Reply } from "./http.js";
import { type SslCertificate, sslCertificateSchema, storageListSchema } from "./schema.js";

export interface StorageWrite {
	certificate: SslCertificate;
	reload?: ReloadCaused;
}

export interface StorageItem {
	storageName: string;
	/** Absolute path on the API host, when the server reports it. */
	file?: string;
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
	/**
	 * The one reload certificatee asks for (docs/reloads.md): replace `name` with the content it already holds and
	 * `force_reload=true`, so the server reloads HAProxy inside the request (200), or answers 400 "Reload failed".
	 */
	forceReload(name: string, pem: string, signal: AbortSignal): Promise<void>;
}

const STORAGE = "/services/haproxy/storage/ssl_certificates";

export function createStorageApi(calls: ApiCalls): StorageApi {
	const { endpoint, read, write } = calls;
	return {
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
			return write(exchange, storageWrite(endpoint, exchange), signal);
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
			return write(exchange, storageWrite(endpoint, exchange), signal);
		},
		forceReload: async (name, pem, signal) => {
			refuseUnaddressable(endpoint, "replaceStorageSSLCertificate", name);
			const exchange: Exchange = {
				operation: "replaceStorageSSLCertificate",
				method: "PUT",
				path: `${named(STORAGE, name)}?force_reload=true`,
				body: { contentType: "text/plain", data: pem },
				read: false,
			};
			await write(exchange, storageWrite(endpoint, exchange), signal);
		},
		delete: async (name, signal) => {
			refuseUnaddressable(endpoint, "deleteStorageSSLCertificate", name);
			const exchange: Exchange = {
				operation: "deleteStorageSSLCertificate",
				method: "DELETE",
				path: `${named(STORAGE, name)}?skip_reload=true`,
				read: false,
			};
			return write(exchange, (reply) => deleted(endpoint, exchange, reply), signal);
		},
	};
}

/** A create or replace answers with the file's metadata, and a 202 when it caused a reload. */
function storageWrite(endpoint: string, exchange: Exchange) {
	return (reply: Reply): StorageWrite => {
		const certificate = parseBody(endpoint, exchange, reply, sslCertificateSchema);
		const reload = reloadOf(reply);
		return reload === undefined ? { certificate } : { certificate, reload };
	};
}

function deleted(endpoint: string, exchange: Exchange, reply: Reply): { reload?: ReloadCaused } {
	expectEmpty(endpoint, exchange, reply);
	const reload = reloadOf(reply);
	return reload === undefined ? {} : { reload };
}

/**
 * The server sanitises the `{name}` of storage GET, PUT and DELETE: a name the sanitiser changes addresses
 * another file (docs/haproxy-dataplane-target.md). Such a request is never sent.
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
