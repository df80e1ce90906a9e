/**
 * Where each crt-store load's files are, from the API's crt_stores and crt_loads (docs/haproxy-dataplane-target.md,
 * "crt-stores (HAProxy 3.x)"). Pure: HAProxy's runtime name of a load, its certificate and key files, the storage
 * names of those files when they sit in the API's storage directory, or why certificatee cannot write them.
 */
import { basename, dirname, isAbsolute, join } from "node:path";
import { storageDirName } from "../haproxy/engine/model.js";
import { apiAddressable, sanitizeStorageName } from "../haproxy/naming.js";
import type { CrtLoad, CrtStore } from "./schema.js";

/** HAProxy's unquoting of one configuration token (client-native hands tokens over with their quotes). */
export function unquote(token: string): string {
	const m = /^"(.*)"$|^'(.*)'$/s.exec(token);
	return m ? (m[1] ?? m[2] ?? "") : token.replace(/\\(.)/g, "$1");
}

/**
 * Where the configuration puts one certificate's files: a crt-store load (`store`), or an `ssl-f-use` line with a
 * `key` argument (`frontend`, front-uses.ts).
 */
export interface LoadPlacement {
	/**
	 * HAProxy's name for it: `@<store>/<alias>`, or `@<store>/<crt as written>` without an alias; an ssl-f-use
	 * line's certificate path.
	 */
	runtimeName: string;
	store?: string;
	/** The frontend of an ssl-f-use line. */
	frontend?: string;
	/** Absolute path of the certificate file, when the store says where it is. */
	certFile?: string;
	/** Absolute path of the key file of a `key` argument (which overrides a key inside the certificate file). */
	keyFile?: string;
	/** The storage names of those files in the API's storage directory. */
	certRef?: string;
	keyRef?: string;
	/** HAProxy's own ACME client manages it (the load's `acme` section): never written by certificatee. */
	acme?: string;
	/** Why certificatee cannot write it through the API (its files are unknown or outside storage). */
	unwritable?: string;
}

/** HAProxy's name for a load: `@<store>/<alias>`, or `@<store>/<crt as written>` without an alias. */
export function loadRuntimeName(store: string, load: CrtLoad): string {
	return `@${store}/${unquote(load.alias ?? load.certificate)}`;
}

/** One file of a load: an absolute path as HAProxy resolves it, or why it cannot tell. */
function resolve(token: string, base: string | undefined, what: string): { path: string } | { why: string } {
	const file = unquote(token);
	if (isAbsolute(file)) return { path: file };
	if (base !== undefined && base !== "") return { path: join(unquote(base), file) };
	return {
		why:
			what === "key"
				? `its key "${file}" is relative and the store has no key-base (HAProxy reads it from its working directory)`
				: `its certificate "${file}" is relative and the store has no crt-base (the global crt-base applies, which the API's crt-store view does not show)`,
	};
}

/** The storage name of a file in the storage directory, or why the API's storage cannot write it. */
export function storageRef(path: string, storageDir: string): { ref: string } | { why: string } {
	if (dirname(path) !== storageDirName(storageDir)) {
		return {
			why: `${path} is outside storage_dir ${storageDirName(storageDir)}: the API's storage cannot write it`,
		};
	}
	const ref = basename(path);
	if (!apiAddressable(ref)) {
		return { why: `the API would address ${ref} as ${sanitizeStorageName(ref)}: rename it on disk` };
	}
	return { ref };
}

/**
 * An OCSP response or SCTs name the certificate they are for: a renewal makes them stale, and the API's storage
 * cannot write or remove them (not a certificate with its key).
 */
export function staleCompanions(line: {
	ocsp?: string | undefined;
	sctl?: string | undefined;
}): string | undefined {
	const stale = (["ocsp", "sctl"] as const).filter((k) => line[k] !== undefined && line[k] !== "");
	if (stale.length === 0) return undefined;
	return `its ${stale.join(" and ")} file would be stale for a renewed certificate, and the API cannot replace it`;
}

/** Every load of every store, placed. Stores come in any order; loads keep their order within a store. */
export function placeLoads(
	stores: ReadonlyArray<CrtStore & { loads: readonly CrtLoad[] }>,
	storageDir: string,
): LoadPlacement[] {
	const placed: LoadPlacement[] = [];
	for (const store of [...stores].sort((a, b) => a.name.localeCompare(b.name))) {
		for (const load of store.loads) {
			const runtimeName = loadRuntimeName(store.name, load);
			const p: LoadPlacement = { runtimeName, store: store.name };
			if (load.acme !== undefined && load.acme !== "") p.acme = unquote(load.acme);
			const why: string[] = [];
			// A file of the load: its path and its storage name, or why the API cannot address it.
			const place = (spec: string, base: string | undefined, kind: "certificate" | "key") => {
				const file = resolve(spec, base, kind);
				if (!("path" in file)) return void why.push(file.why);
				const ref = storageRef(file.path, storageDir);
				if (!("ref" in ref)) why.push(ref.why);
				return { path: file.path, ref: "ref" in ref ? ref.ref : undefined };
			};
			const cert = place(load.certificate, store.crt_base, "certificate");
			if (cert !== undefined) {
				p.certFile = cert.path;
				if (cert.ref !== undefined) p.certRef = cert.ref;
			}
			const stale = staleCompanions(load);
			if (stale !== undefined) why.push(stale);
			if (load.key !== undefined && load.key !== "") {
				const key = place(load.key, store.key_base, "key");
				if (key !== undefined) {
					p.keyFile = key.path;
					if (key.ref !== undefined) p.keyRef = key.ref;
				}
			}
			if (why.length > 0) p.unwritable = why.join("; ");
			placed.push(p);
		}
	}
	return placed;
}
