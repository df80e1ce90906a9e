/**
 * HAProxy's crt-store sections through the API's configuration endpoints (`/configuration/crt_stores`, v3.2+
 * paths), read only: certificatee never edits HAProxy's configuration. A server without them (v2) answers 404,
 * read as no stores.
 */
import { isCertificateeError } from "../../errors.js";
import { type ApiCalls, named } from "./calls.js";
import { type CrtLoad, type CrtStore, crtLoadsSchema, crtStoresSchema } from "./schema.js";

export interface CrtStoreApi {
	/** Every crt-store section, in no particular order (the server lists them from a Go map). */
	stores(signal: AbortSignal): Promise<CrtStore[]>;
	/** The loads of one store in file order; [] for a store without loads or a server without the path. */
	loads(store: string, signal: AbortSignal): Promise<CrtLoad[]>;
}

const STORES = "/services/haproxy/configuration/crt_stores";

const noneOn404 =
	<T>(empty: T) =>
	(e: unknown): T => {
		if (isCertificateeError(e, "ENDPOINT_NOT_FOUND")) return empty;
		throw e;
	};

export function createCrtStoreApi({ read }: ApiCalls): CrtStoreApi {
	return {
		stores: (signal) => read("getCrtStores", STORES, crtStoresSchema, signal).catch(noneOn404([])),
		loads: (store, signal) =>
			read("getCrtLoads", `${named(STORES, store)}/crt_loads`, crtLoadsSchema, signal).catch(noneOn404([])),
	};
}
