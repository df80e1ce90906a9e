/**
 * Where each observed ref of a haproxy-runtime endpoint lives (reconcile/model.ts `Placement`): how HAProxy
 * makes it live, its certificate file, its key file, its companion files, and whether HAProxy's own ACME
 * manages it. Learnt from what HAProxy says (`Crt filename` / `Key filename` on 3.2+, `@store/alias` names,
 * the `@<frontend>` crt-list of ssl-f-use, `acme status`), from the files (a PEM holding no key, with `X.key`
 * beside it) and from the target's `crt_stores` (the crt-base / key-base runtime does not print). Never from a
 * file name alone: what cannot be told is `unknown`, and such a ref is never written.
 */
import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, dirname, isAbsolute, join } from "node:path";
import { leafMeta } from "../../reconcile/leaf-meta.js";
import type { ExtraFile, ObservedRef, Placement, PlacementVia, RefMeta } from "../../reconcile/model.js";
import { keyMatchesPem } from "./keys.js";
import type { CertDetail } from "./parse.js";
import type { RuntimeTargetConfig } from "./schema.js";
import { type CrtDirLayout, holdsKey } from "./storage.js";

/** Parsed files outside crt_dir and key checks, reused while the files are unchanged (by path). */
export type PlacementCache = Map<
	string,
	{ stamp: string; meta?: RefMeta; keyInside?: boolean; matches?: boolean }
>;

export interface PlaceInput {
	config: Pick<RuntimeTargetConfig, "crt_dir" | "crt_stores">;
	/** crt_dir as HAProxy names it. */
	dirName: string;
	details: ReadonlyMap<string, CertDetail | undefined>;
	layout: CrtDirLayout;
	/** `acme status`: certificate name -> acme section. */
	acme: ReadonlyMap<string, string>;
	cache: PlacementCache;
}

const EXTRAS: readonly ExtraFile[] = ["key", "ocsp", "issuer", "sctl"];

function stampOf(path: string): string | undefined {
	const s = statSync(path, { throwIfNoEntry: false });
	return s?.isFile() ? `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}` : undefined;
}

function viaOf(r: ObservedRef, name: string, dirName: string): PlacementVia {
	if (name.startsWith("@") && name.includes("/")) return "crt-store";
	if (r.crtLists.some((l) => l.startsWith("@"))) return "ssl-f-use";
	if (r.external === undefined && (r.crtLists.length === 0 || r.crtLists.includes(dirName))) return "crt-dir";
	return r.crtLists.length > 0 ? "crt-list" : "crt";
}

/** A file name as HAProxy spells it, made absolute: as is, or against a crt-store's configured base. */
function resolve(
	spelled: string,
	store: string | undefined,
	base: "crt_base" | "key_base",
	config: PlaceInput["config"],
): string | { unknown: string } {
	if (isAbsolute(spelled)) return spelled;
	const dir = store === undefined ? undefined : config.crt_stores?.[store]?.[base];
	if (dir !== undefined) return join(dir, spelled);
	return {
		unknown:
			store === undefined
				? `HAProxy loads it from "${spelled}", relative to a directory the runtime API does not print; certificatee never writes it`
				: `HAProxy loads it from crt-store ${store}'s "${spelled}", relative to the store's ${base.replace("_", "-")}, which the runtime API does not print: set crt_stores.${store}.${base} in the target to renew it in place`,
	};
}

async function readCached(
	path: string,
	cache: PlacementCache,
): Promise<{ meta?: RefMeta; keyInside?: boolean; pem?: string } | undefined> {
	const stamp = stampOf(path);
	if (stamp === undefined) return undefined;
	const hit = cache.get(path);
	if (hit?.stamp === stamp && hit.meta !== undefined) return hit;
	const pem = await readFile(path, "utf8").catch(() => undefined);
	if (pem === undefined) return undefined;
	const entry = { stamp, meta: leafMeta(pem), keyInside: holdsKey(pem) };
	cache.set(path, entry);
	return { ...entry, pem };
}

/** Does `keyFile` hold the key of `certFile`'s leaf? Cached while both files are unchanged. */
async function pairMatches(certFile: string, keyFile: string, cache: PlacementCache): Promise<boolean> {
	const key = `${certFile}\0${keyFile}`;
	const stamp = `${stampOf(certFile)}|${stampOf(keyFile)}`;
	const hit = cache.get(key);
	if (hit?.stamp === stamp && hit.matches !== undefined) return hit.matches;
	const [cert, pem] = await Promise.all([
		readFile(certFile, "utf8").catch(() => ""),
		readFile(keyFile, "utf8").catch(() => ""),
	]);
	const matches = keyMatchesPem(cert, pem);
	cache.set(key, { stamp, matches });
	return matches;
}

function existingExtras(certFile: string, input: PlaceInput): Placement["extras"] {
	const inCrtDir = dirname(certFile) === input.config.crt_dir.replace(/\/+$/, "");
	const extras: Placement["extras"] = {};
	for (const ext of EXTRAS) {
		const path = `${certFile}.${ext}`;
		const exists = inCrtDir ? input.layout.names.has(basename(path)) : stampOf(path) !== undefined;
		if (exists) extras[ext] = path;
	}
	return extras;
}

/** The placement of one ref, and the storage side read from its certificate file when that is not crt_dir's. */
async function placeOne(
	r: ObservedRef,
	input: PlaceInput,
): Promise<{ placement: Placement; storage?: RefMeta }> {
	const name = r.runtimeName ?? r.ref;
	const via = viaOf(r, name, input.dirName);
	const store = via === "crt-store" ? name.slice(1, name.indexOf("/")) : undefined;
	const detail = input.details.get(name);
	const acme = input.acme.get(name);
	const base: Placement = { via, extras: {}, ...(acme ? { acme } : {}) };
	const inCrtDir = r.external === undefined;
	// A ref of crt_dir is its file there, however haproxy.cfg spells the directory (crt_dir_name).
	const cert = inCrtDir
		? join(input.config.crt_dir, r.ref)
		: via === "crt-store" && detail?.crtFilename === undefined
			? {
					unknown: `HAProxy before 3.2 does not print the files of crt-store load ${name}; certificatee never writes it`,
				}
			: resolve(detail?.crtFilename ?? name, store, "crt_base", input.config);
	if (typeof cert !== "string") return { placement: { ...base, unknown: cert.unknown } };
	const read = inCrtDir ? undefined : await readCached(cert, input.cache);
	if (!inCrtDir && read?.meta === undefined) {
		return {
			placement: { ...base, certFile: cert, unknown: `its certificate file ${cert} cannot be read here` },
		};
	}
	const extras = existingExtras(cert, input);
	const placement: Placement = { ...base, certFile: cert, extras };
	const keyInside = inCrtDir ? !input.layout.keyless.has(r.ref) : read?.keyInside === true;
	const keySpelled = detail?.keyFilename;
	let keyFile: string | undefined;
	if (keySpelled !== undefined) {
		const companion = detail?.crtFilename !== undefined && keySpelled === `${detail.crtFilename}.key`;
		const inside = keySpelled === detail?.crtFilename;
		const resolved = inside
			? cert
			: companion
				? `${cert}.key`
				: resolve(keySpelled, store, "key_base", input.config);
		if (typeof resolved !== "string") return { placement: { ...placement, unknown: resolved.unknown } };
		if (resolved !== cert) keyFile = resolved;
	} else if (!keyInside) {
		if (extras.key === undefined) {
			return {
				placement: {
					...placement,
					unknown: `${cert} holds no private key and no ${basename(cert)}.key is beside it: its key file is unknown`,
				},
			};
		}
		keyFile = extras.key;
	}
	if (keyFile !== undefined) {
		const companion = (via === "crt-dir" || via === "crt-list") && keyFile === `${cert}.key`;
		placement.key = { file: keyFile, by: companion ? "companion" : "argument" };
	}
	const storage = inCrtDir ? r.storage : read?.meta;
	// The key a reload pairs with the leaf, or a key left beside a combined PEM: either must match it.
	const paired = keyFile ?? extras.key;
	if (storage !== undefined && paired !== undefined && !(await pairMatches(cert, paired, input.cache))) {
		return { placement, storage: { ...storage, keyMismatch: true } };
	}
	return { placement, ...(storage ? { storage } : {}) };
}

/**
 * Every ref gets its placement. A ref HAProxy loads from a crt-store or an ssl-f-use line with known files is
 * no longer `external`: it is written in place. A file of crt_dir that is such a ref's certificate file is
 * that ref, not another one. A file of crt_dir HAProxy does not load and that holds no key is not
 * certificatee's to write (another layout's file): external.
 */
export async function placeRefs(refs: Map<string, ObservedRef>, input: PlaceInput): Promise<void> {
	const byFile = new Map<string, string>();
	for (const r of [...refs.values()]) {
		if (r.runtime === undefined && r.external === undefined) continue;
		const { placement, storage } = await placeOne(r, input);
		r.placement = placement;
		const writable = placement.unknown === undefined && placement.acme === undefined;
		if (
			r.external !== undefined &&
			writable &&
			(placement.via === "crt-store" || placement.via === "ssl-f-use")
		) {
			delete r.external;
		}
		// An external ref keeps no storage side: it is never written, whatever its file holds.
		if (storage !== undefined && r.external === undefined) r.storage = storage;
		if (placement.certFile !== undefined) byFile.set(placement.certFile, r.ref);
	}
	const dir = input.config.crt_dir.replace(/\/+$/, "");
	for (const r of [...refs.values()]) {
		if (r.runtime !== undefined || r.external !== undefined) continue;
		const owner = byFile.get(join(dir, r.ref));
		if (owner !== undefined && owner !== r.ref) {
			refs.delete(r.ref);
			continue;
		}
		if (input.layout.keyless.has(r.ref)) {
			r.external = `${join(dir, r.ref)} holds no private key and HAProxy does not load it from crt_dir: another layout's file (a crt-store or ssl-f-use certificate file, configured elsewhere); certificatee never writes or removes it`;
		} else {
			r.placement = {
				via: "crt-dir",
				certFile: join(dir, r.ref),
				extras: existingExtras(join(dir, r.ref), input),
			};
		}
	}
}
