/**
 * HAProxy's in-memory certificate store through the API (`/services/haproxy/runtime/ssl_certs`), by HAProxy's
 * name (usually the absolute path). Errors arrive as 500; writes answer with an empty body.
 */
import { saysInUse } from "../haproxy/refusals.js";
import { type ApiCalls, multipart, named } from "./calls.js";
import { runtimeListSchema, type SslCertificate, sslCertificateSchema } from "./schema.js";

/** HAProxy's in-memory certificate store, by HAProxy's name (usually the absolute path). Errors arrive as 500. */
export interface RuntimeApi {
	list(signal: AbortSignal): Promise<string[]>;
	/** Serial is uppercase hex here. Unknown name: ENDPOINT_NOT_FOUND; a 3.2+ certificate with a separate key
	 * file: RUNTIME_SEPARATE_KEY (the server cannot read it). */
	get(name: string, signal: AbortSignal): Promise<SslCertificate>;
	/** The server keeps only the basename of `name` (dataplaneapi #379). */
	create(name: string, pem: string, signal: AbortSignal): Promise<void>;
	replace(name: string, pem: string, signal: AbortSignal): Promise<void>;
	delete(name: string, signal: AbortSignal): Promise<void>;
}

const RUNTIME = "/services/haproxy/runtime/ssl_certs";

/**
 * client-native's parseCertEntry on HAProxy 3.2+, for a certificate whose `Key filename` differs from its
 * `Crt filename` (a crt-store load or ssl-f-use line with a `key` argument): a 500, on every attempt.
 */
const SEPARATE_KEY = /storing the private key in a separate file is not supported/;

export function createRuntimeApi({ read, writeEmpty }: ApiCalls): RuntimeApi {
	return {
		list: async (signal) =>
			(await read("getAllCerts", RUNTIME, runtimeListSchema, signal)).map((item) => item.storage_name),
		get: (name, signal) =>
			read("getCert", named(RUNTIME, name), sslCertificateSchema, signal, (message) =>
				SEPARATE_KEY.test(message) ? "RUNTIME_SEPARATE_KEY" : undefined,
			),
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
}
