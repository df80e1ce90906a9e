/**
 * Where each observed ref of a haproxy-runtime endpoint lives (targets/haproxy/engine/model.ts `Placement`): how HAProxy
 * makes it live, its certificate file, its key file, its companion files, and whether HAProxy's own ACME
 * manages it. Learnt from what HAProxy says (`Crt filename` / `Key filename` on 3.2+, `@store/alias` names,
 * the `@<frontend>` crt-list of ssl-f-use, `acme status`), from the files (a PEM holding no key, with `X.key`
 * beside it) and from the target's `crt_stores` (the crt-base / key-base runtime does not print). Never from a
 * file name alone: what cannot be told is `unknown`, and such a ref is never written.
 */
import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { leafMeta } from "../../reconcile/leaf-meta.js";
import type { RefMeta } from "../../reconcile/model.js";
import type { ExtraFile, ObservedRef, Placement, PlacementVia } from "../haproxy/engine/model.js";
import { where } from "./haproxy-config.js";
import { keyMatchesPem } from "./keys.js";
import type { CertDetail } from "./parse.js";
import { type CrtDirLayout, holdsKey } from "./storage.js";
import {
	cfgInvalid,
	mismatch,
	RELOAD_OR_FIX,
	resolve,
	type StoreInput,
	storeFiles,
	type Unknown,
} from "./store-files.js";

/** Parsed files outside crt_dir and key checks, reused while the files are unchanged (by path). */
export type PlacementCache = Map<
	string,
	{ stamp: string; meta?: RefMeta; keyInside?: boolean; matches?: boolean }
>;

export interface PlaceInput extends StoreInput {
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

/**
 * The stem HAProxy adds an extra file's extension to: the certificate file itself, or, with
 * `ssl-load-extra-del-ext`, a `.crt` file without its extension (`site.crt` -> `site.key`).
 */
export function extrasStem(certFile: string, delExt: boolean): string {
	return delExt && certFile.endsWith(".crt") ? certFile.slice(0, -".crt".length) : certFile;
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

function exists(path: string, input: PlaceInput): boolean {
	const inCrtDir = dirname(path) === input.config.crt_dir.replace(/\/+$/, "");
	return inCrtDir ? input.layout.names.has(basename(path)) : stampOf(path) !== undefined;
}

function existingExtras(certFile: string, input: PlaceInput, delExt = false): Placement["extras"] {
	const extras: Placement["extras"] = {};
	const stem = extrasStem(certFile, delExt);
	for (const ext of EXTRAS) {
		const path = `${stem}.${ext}`;
		if (exists(path, input)) extras[ext] = path;
	}
	return extras;
}

/**
 * Whether HAProxy strips `.crt` before adding an extra file's extension (`ssl-load-extra-del-ext`), for this
 * certificate file: what haproxy_config says, which must agree with the key file 3.2+ printed when it
 * printed one; else that printed key file; else no for a file holding its key (the runtime cannot tell,
 * and only its .ocsp/.issuer/.sctl are at stake). A keyless `.crt` file with only `X.key` beside it, on a
 * version that prints no key file, is unknown: file names alone never decide.
 */
function delExtOf(
	cert: string,
	keyInside: boolean,
	keyFile: string | undefined,
	input: PlaceInput,
): boolean | Unknown {
	if (!cert.endsWith(".crt")) return false;
	const stripped = `${extrasStem(cert, true)}.key`;
	const said = keyFile === undefined ? undefined : keyFile === stripped;
	const { cfg } = input;
	if (cfg !== undefined) {
		const cfgSays = cfg.delExt !== undefined;
		if (said === undefined || said === cfgSays) return cfgSays;
		return mismatch(
			`HAProxy's running worker pairs ${cert} with ${keyFile}, but haproxy_config ${cfg.delExt ? `sets ssl-load-extra-del-ext at ${where(cfg.delExt)}` : `(${cfg.files.join(", ")}) does not set ssl-load-extra-del-ext`}`,
			`${cfg.delExt ? where(cfg.delExt) : cfg.files.join(", ")}: ${RELOAD_OR_FIX}`,
		);
	}
	if (said !== undefined) return said;
	if (keyInside) return false;
	if (input.cfgError !== undefined) return cfgInvalid(input.cfgError, `the key file of ${cert}`);
	if (!exists(stripped, input)) return false;
	return {
		unknown: `${cert} holds no private key and ${basename(stripped)} is beside it${exists(`${cert}.key`, input) ? ` (and ${basename(cert)}.key)` : ""}: HAProxy pairs them only with ssl-load-extra-del-ext, which this HAProxy's runtime API does not show; set haproxy_config in the target`,
	};
}

/** How a ref's certificate file is loaded, as far as its key is concerned. */
interface KeyFacts {
	via: PlacementVia;
	keyInside: boolean;
	/** A crt-store load's files, when known. */
	stored: { cert: string; key?: string } | undefined;
	detail: CertDetail | undefined;
}

/**
 * The key file HAProxy pairs with `cert` (3.2+ Key filename, a crt-store load's key, or the companion
 * `X.key` of a file holding no key) and the extra files beside it, or why the key file is unknown.
 */
function keyOf(
	cert: string,
	facts: KeyFacts,
	input: PlaceInput,
):
	| { extras: Placement["extras"]; key?: NonNullable<Placement["key"]> }
	| ({ extras: Placement["extras"] } & Unknown) {
	const { via, keyInside, stored, detail } = facts;
	let keyFile: string | undefined = stored?.key;
	const keySpelled = stored === undefined ? detail?.keyFilename : undefined;
	if (keySpelled !== undefined && keySpelled !== detail?.crtFilename) {
		const crt = detail?.crtFilename;
		// X.key (ssl-load-extra-del-ext) or X.crt.key beside a crt file the runtime names as haproxy.cfg spells it.
		const resolved =
			crt !== undefined && keySpelled === `${crt}.key`
				? `${cert}.key`
				: crt?.endsWith(".crt") && keySpelled === `${extrasStem(crt, true)}.key`
					? `${extrasStem(cert, true)}.key`
					: resolve(keySpelled, undefined, "key_base", input.config);
		if (typeof resolved !== "string") return { extras: {}, ...resolved };
		if (resolved !== cert) keyFile = resolved;
	}
	const companionVia = via === "crt-dir" || via === "crt-list";
	const delExt = companionVia ? delExtOf(cert, keyInside, keyFile, input) : false;
	if (typeof delExt !== "boolean") return { extras: {}, ...delExt };
	const extras = existingExtras(cert, input, delExt);
	if (keyFile === undefined && !keyInside && stored === undefined) {
		if (extras.key === undefined) {
			return {
				extras,
				unknown: `${cert} holds no private key and no ${basename(extrasStem(cert, delExt))}.key is beside it: its key file is unknown`,
			};
		}
		keyFile = extras.key;
	}
	if (keyFile === undefined) return { extras };
	const companion = companionVia && keyFile === `${extrasStem(cert, delExt)}.key`;
	return { extras, key: { file: keyFile, by: companion ? "companion" : "argument" } };
}

function unknownOf(u: Unknown): Pick<Placement, "unknown" | "unknownAs"> {
	return { unknown: u.unknown, ...(u.as ? { unknownAs: u.as } : {}) };
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
	const acme = input.acme.get(name) ?? (store !== undefined ? input.cfg?.loads.get(name)?.acme : undefined);
	const base: Placement = { via, extras: {}, ...(acme ? { acme } : {}) };
	const inCrtDir = r.external === undefined;
	// A crt-store load: its files from haproxy_config and/or the runtime (3.2+), which must agree.
	const stored = store !== undefined && !inCrtDir ? storeFiles(name, store, detail, input) : undefined;
	if (stored !== undefined && "unknown" in stored) return { placement: { ...base, ...unknownOf(stored) } };
	// A ref of crt_dir is its file there, however haproxy.cfg spells the directory (crt_dir_name).
	const cert = inCrtDir
		? join(input.config.crt_dir, r.ref)
		: (stored?.cert ?? resolve(detail?.crtFilename ?? name, undefined, "crt_base", input.config));
	if (typeof cert !== "string") return { placement: { ...base, unknown: cert.unknown } };
	const read = inCrtDir ? undefined : await readCached(cert, input.cache);
	if (!inCrtDir && read?.meta === undefined) {
		return {
			placement: { ...base, certFile: cert, unknown: `its certificate file ${cert} cannot be read here` },
		};
	}
	const keyInside = inCrtDir ? !input.layout.keyless.has(r.ref) : read?.keyInside === true;
	const keyed = keyOf(cert, { via, keyInside, stored, detail }, input);
	const placement: Placement = { ...base, certFile: cert, extras: keyed.extras };
	// Only the file tells: 3.2+ print an `SCTL filename` for every certificate, loaded or not.
	if (keyed.extras.sctl !== undefined) placement.sctlLoaded = true;
	if ("unknown" in keyed) return { placement: { ...placement, ...unknownOf(keyed) } };
	if (keyed.key !== undefined) placement.key = keyed.key;
	const keyFile = keyed.key?.file;
	const extras = keyed.extras;
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
			const file = join(dir, r.ref);
			r.placement = {
				via: "crt-dir",
				certFile: file,
				extras: existingExtras(file, input, delExtOf(file, true, undefined, input) === true),
			};
		}
	}
}
