/**
 * Where HAProxy's configuration declares certificate files, through the API's configuration endpoints (v3.2+
 * paths): crt-store sections and their loads (`/configuration/crt_stores`), and a frontend's `ssl-f-use` lines
 * (`/configuration/frontends/{name}/ssl_front_uses`). Read only: certificatee never edits HAProxy's
 * configuration. A server without them answers 404, read as none.
 */
import { isCertificateeError } from "../../errors.js";
import { type ApiCalls, named } from "./calls.js";
import {
	type CrtLoad,
	type CrtStore,
	crtLoadsSchema,
	crtStoresSchema,
	type SslFrontUse,
	sslFrontUsesSchema,
} from "./schema.js";

export interface CrtStoreApi {
	/** Every crt-store section, in no particular order (the server lists them from a Go map). */
	stores(signal: AbortSignal): Promise<CrtStore[]>;
	/** The loads of one store in file order; [] for a store without loads or a server without the path. */
	loads(store: string, signal: AbortSignal): Promise<CrtLoad[]>;
	/** The `ssl-f-use` lines of one frontend in file order; [] for none or a server without the path. */
	frontUses(frontend: string, signal: AbortSignal): Promise<SslFrontUse[]>;
}

const STORES = "/services/haproxy/configuration/crt_stores";
const FRONTENDS = "/services/haproxy/configuration/frontends";

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
		frontUses: (frontend, signal) =>
			read(
				"getAllSSLFrontUses",
				`${named(FRONTENDS, frontend)}/ssl_front_uses`,
				sslFrontUsesSchema,
				signal,
			).catch(noneOn404([])),
	};
}
