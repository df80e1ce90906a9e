/**
 * The double's crt-store configuration endpoints (`/configuration/crt_stores`, `.../{crt_store}/crt_loads`),
 * read from the haproxy.cfg the test HAProxy runs, the way dataplaneapi 3.4 reads it through client-native's
 * config-parser (docs/haproxy-dataplane-target.md, "crt-stores (HAProxy 3.x)"):
 *
 * - tokens keep their quotes: `load crt "a.crt"` is `certificate: "\"a.crt\""`, and `{certificate}` in a URL
 *   must spell them (config-parser common.StringSplitWithCommentIgnoreEmpty, parsers.LoadCert);
 * - a store's own GET never carries its loads (the handlers call GetCrtStore(s), not the structured variant);
 * - stores come in Go map order (random), loads in file order; a store without loads answers `null`;
 * - a comment on a section or load line is its `metadata` (JSON, else `{"comment": text}`);
 * - errors as misc.HandleError maps client-native's ConfErrors: an unknown store is 404 on its own GET but 400
 *   ("missing parent") on its loads; an unknown load 404.
 *
 * Writes are not served (501): certificatee never edits HAProxy's configuration.
 */
import { readFile } from "node:fs/promises";
import type { DoubleContext, Handled } from "./context.js";
import { errorBody } from "./context.js";

export interface CrtLoadLine {
	certificate: string;
	key?: string;
	alias?: string;
	ocsp?: string;
	issuer?: string;
	sctl?: string;
	acme?: string;
	/** The `domains` argument split at commas (quotes kept, so `"a,b"` is `["\"a", "b\""]`). */
	domains?: string[];
	ocsp_update?: "enabled" | "disabled";
	metadata?: Record<string, unknown>;
}

export interface CrtStoreSection {
	name: string;
	crt_base?: string;
	key_base?: string;
	metadata?: Record<string, unknown>;
	loads: CrtLoadLine[];
}

/**
 * client-native's line splitter: blanks separate tokens unless quoted or escaped, quotes stay in the token,
 * `#` outside quotes starts the comment (leading blanks of the comment dropped).
 */
export function splitLine(s: string): { parts: string[]; comment: string } {
	const parts: string[] = [];
	let buff = "";
	let single = false;
	let double = false;
	for (let i = 0; i < s.length; i++) {
		const c = s[i] as string;
		const escaped = i > 0 && s[i - 1] === "\\";
		if (!single && !double) {
			if (c === "#" && !escaped) {
				if (buff !== "") parts.push(buff);
				return { parts, comment: s.slice(i + 1).replace(/^ +/, "") };
			}
			if ((c === " " && !escaped) || c === "\t") {
				if (buff !== "") parts.push(buff);
				buff = "";
				continue;
			}
		}
		buff += c;
		if (c === '"' && !single && !escaped) double = !double;
		else if (c === "'" && !double) single = single ? false : !escaped;
	}
	if (buff !== "") parts.push(buff);
	return { parts, comment: "" };
}

/** Section keywords of config-parser (a line starting with one ends the current section). */
export const SECTIONS = new Set([
	"global",
	"defaults",
	"frontend",
	"backend",
	"listen",
	"resolvers",
	"userlist",
	"peers",
	"mailers",
	"cache",
	"program",
	"http-errors",
	"ring",
	"log-forward",
	"fcgi-app",
	"crt-store",
	"traces",
	"acme",
	"log-profile",
	"dynamic-update",
]);

/** misc.ParseMetadata: a JSON object, else the text under "comment". */
function metadataOf(comment: string): Record<string, unknown> | undefined {
	if (comment === "") return undefined;
	try {
		const value: unknown = JSON.parse(comment);
		if (value !== null && typeof value === "object" && !Array.isArray(value))
			return value as Record<string, unknown>;
	} catch {
		// not JSON
	}
	return { comment };
}

/** The load keywords that take one value, and the field each fills. */
const LOAD_FIELDS: Record<string, "certificate" | "key" | "alias" | "ocsp" | "issuer" | "sctl" | "acme"> = {
	crt: "certificate",
	key: "key",
	alias: "alias",
	ocsp: "ocsp",
	issuer: "issuer",
	sctl: "sctl",
	acme: "acme",
};

/** parsers.LoadCert.parse: keyword/value pairs in any order, unknown words skipped; undefined without crt. */
function parseLoad(parts: string[], comment: string): CrtLoadLine | undefined {
	if (parts.length < 3 || parts[0] !== "load") return undefined;
	const load: Partial<CrtLoadLine> = {};
	for (let i = 1; i < parts.length; i++) {
		const word = parts[i] as string;
		const value = parts[i + 1];
		const field = Object.hasOwn(LOAD_FIELDS, word) ? LOAD_FIELDS[word] : undefined;
		if (field !== undefined || word === "domains") {
			// CheckParsePair: a keyword at the end of the line is skipped.
			if (value === undefined) continue;
			i++;
			if (field !== undefined) load[field] = value;
			else if (value !== "") load.domains = value.split(",");
		} else if (word === "ocsp-update") {
			if (value !== "on" && value !== "off") return undefined;
			load.ocsp_update = value === "on" ? "enabled" : "disabled";
			i++;
		}
	}
	if (!load.certificate) return undefined;
	const metadata = metadataOf(comment);
	return { ...(load as CrtLoadLine), ...(metadata ? { metadata } : {}) };
}

/** Every crt-store section of a configuration, in file order, as client-native's parser sees it. */
export function parseCrtStores(config: string): CrtStoreSection[] {
	const stores: CrtStoreSection[] = [];
	let current: CrtStoreSection | undefined;
	for (const raw of config.split("\n")) {
		const line = raw.replace(/\r+$/, "");
		const { parts, comment } = splitLine(line);
		const word = parts[0];
		if (word === undefined) continue;
		if (SECTIONS.has(word)) {
			current = undefined;
			if (word !== "crt-store") continue;
			const name = parts[1] ?? "";
			// A quoted section name is a parse error in config-parser (extra.Section.Parse).
			if (/["']/.test(name)) continue;
			const metadata = metadataOf(comment);
			current = { name, loads: [], ...(metadata ? { metadata } : {}) };
			// A second section of the same name replaces the first (a map keyed by name).
			const at = stores.findIndex((s) => s.name === name);
			if (at >= 0) stores.splice(at, 1);
			stores.push(current);
			continue;
		}
		if (current === undefined) continue;
		if ((word === "crt-base" || word === "key-base") && parts[1] !== undefined) {
			current[word === "crt-base" ? "crt_base" : "key_base"] = parts[1];
		} else if (word === "load") {
			const load = parseLoad(parts, comment);
			if (load) current.loads.push(load);
		}
	}
	return stores;
}

function storeBody(s: CrtStoreSection): Record<string, unknown> {
	return {
		name: s.name,
		...(s.crt_base ? { crt_base: s.crt_base } : {}),
		...(s.key_base ? { key_base: s.key_base } : {}),
		...(s.metadata ? { metadata: s.metadata } : {}),
	};
}

/** Go's map iteration order: every listing in a fresh random order, so no client may rely on one. */
function shuffled<T>(items: T[]): T[] {
	const out = [...items];
	for (let i = out.length - 1; i > 0; i--) {
		const j = Math.floor(Math.random() * (i + 1));
		[out[i], out[j]] = [out[j] as T, out[i] as T];
	}
	return out;
}

async function stores(ctx: DoubleContext): Promise<CrtStoreSection[]> {
	return parseCrtStores(await readFile(ctx.configFile, "utf8"));
}

export const crtStores = {
	async list(ctx: DoubleContext): Promise<Handled> {
		return { status: 200, body: shuffled(await stores(ctx)).map(storeBody) };
	},

	async get(ctx: DoubleContext, name: string): Promise<Handled> {
		const store = (await stores(ctx)).find((s) => s.name === name);
		if (!store) return errorBody(404, `missing object: crt-store section '${name}' does not exist`);
		return { status: 200, body: storeBody(store) };
	},

	async loads(ctx: DoubleContext, storeName: string): Promise<Handled> {
		const store = (await stores(ctx)).find((s) => s.name === storeName);
		if (!store) return errorBody(400, `missing parent: crt_store ${storeName} does not exist`);
		// ParseCrtLoads returns a nil slice for a store without loads: JSON null, not [].
		return { status: 200, body: store.loads.length === 0 ? null : store.loads };
	},

	async load(ctx: DoubleContext, storeName: string, certificate: string): Promise<Handled> {
		const store = (await stores(ctx)).find((s) => s.name === storeName);
		const load = store?.loads.find((l) => l.certificate === certificate);
		if (!load)
			return errorBody(
				404,
				`missing object: CrtLoad ${certificate} does not exist in ${storeName} crt_store`,
			);
		return { status: 200, body: load };
	},
};
