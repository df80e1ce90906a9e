/**
 * Phase 1 for one Data Plane API endpoint: every storage file and every runtime certificate with its live
 * metadata, and the crt-lists that reference them, joined into ObservedRefs. The mapping is pure
 * (`joinRefs`, `storageMeta`, `runtimeMeta`); `observeEndpoint` only fetches.
 */
import { basename } from "node:path";
import { parseSubjectAltName } from "../../certificates/bundle.js";
import { keyTypeOf } from "../../certificates/chain.js";
import { nameSet, normaliseSerial } from "../../certificates/names.js";
import { isCertificateeError } from "../../errors.js";
import type { RefMeta, ServedCertificate } from "../../reconcile/model.js";
import type { ObservedCrtList, ObservedRef } from "../haproxy/engine/model.js";
import { apiAddressable, sanitizeStorageName } from "../haproxy/naming.js";
import type { DataplaneClient } from "./client.js";
import { crtListMembership, describeCrtLists } from "./crt-list-view.js";
import { placeLoads } from "./crt-stores.js";
import { frontendsOf, placeFrontUses } from "./front-uses.js";
import type { FetchedRuntime, FetchedStorage, Listed, Reusable } from "./memory.js";
import { placedRefs, servedForUnreadable } from "./placed-refs.js";
import { runJobs } from "./run-jobs.js";
import type { CrtListEntry, CrtLoad, CrtStore, SslCertificate, SslFrontUse } from "./schema.js";
import { placeSeparateKeys, separateKeyFiles } from "./separate-keys.js";

function date(value: string | null | undefined): Date | undefined {
	if (!value) return undefined;
	const d = new Date(value);
	// The server turns an unparsable HAProxy date into year 1.
	return Number.isNaN(d.getTime()) || d.getUTCFullYear() < 1970 ? undefined : d;
}

function list(value: string | undefined): string[] {
	return (value ?? "")
		.split(",")
		.map((s) => s.trim())
		.filter((s) => s !== "");
}

/**
 * Storage metadata: decimal serial, names from `domains` and `ip_addresses`, the chain as the issuers' CNs
 * (`issuers`: all the storage view shows of it), the key type from `algorithm` when the server sends it.
 */
export function storageMeta(c: SslCertificate): RefMeta {
	const meta: RefMeta = {};
	if (c.serial) meta.serial = normaliseSerial(c.serial, 10);
	const notAfter = date(c.not_after);
	if (notAfter) meta.notAfter = notAfter;
	const names = [...list(c.domains), ...list(c.ip_addresses)];
	if (names.length > 0) meta.names = nameSet(names);
	if (c.issuers !== undefined) meta.chain = { kind: "issuer-cns", cns: list(c.issuers) };
	if (c.algorithm) meta.keyType = keyTypeOf(c.algorithm);
	return meta;
}

/** Runtime metadata: HAProxy's hex serial, SHA-1, status, names from `subject_alternative_names`. */
export function runtimeMeta(c: SslCertificate): RefMeta {
	const meta: RefMeta = {};
	if (c.serial) meta.serial = normaliseSerial(c.serial, 16);
	if (c.sha1_finger_print) meta.sha1 = c.sha1_finger_print.replace(/:/g, "").toUpperCase();
	const notAfter = date(c.not_after);
	if (notAfter) meta.notAfter = notAfter;
	if (c.subject_alternative_names) {
		// HAProxy 2.6 prints no IP SANs: then they come from the storage file when it holds the same leaf.
		const { dns, ip } = parseSubjectAltName(c.subject_alternative_names);
		meta.names = nameSet([...dns, ...ip]);
		if (ip.length === 0) meta.namesDnsOnly = true;
	}
	if (c.status) meta.status = c.status;
	if (c.algorithm) meta.keyType = keyTypeOf(c.algorithm);
	// Only the last intermediate's subject and issuer; absent fields say nothing (older servers omit them).
	if (c.chain_subject !== undefined || c.chain_issuer !== undefined) {
		meta.chain = {
			kind: "last-pair",
			last: { subject: c.chain_subject ?? "", issuer: c.chain_issuer ?? "" },
		};
	}
	return meta;
}

/**
 * Joins storage files and runtime certificates: a runtime name equal to a file's path (or, for certificates
 * created through the runtime API, to its bare storage name) is the same ref; other runtime names become
 * refs of their own, named by their basename (a storage file deleted but still in HAProxy's memory).
 */
export function joinRefs(
	storage: readonly FetchedStorage[],
	runtime: readonly FetchedRuntime[],
	crtLists: ReadonlyMap<string, string[]>,
): ObservedRef[] {
	const refs = new Map<string, ObservedRef>();
	const byPath = new Map<string, ObservedRef>();
	for (const s of storage) {
		const ref: ObservedRef = {
			ref: s.storageName,
			storage: s.meta,
			crtLists: [],
			...(s.addressedAs === undefined ? {} : { unaddressable: { addressedAs: s.addressedAs } }),
		};
		refs.set(s.storageName, ref);
		if (s.file) byPath.set(s.file, ref);
	}
	const attach = (ref: ObservedRef, r: FetchedRuntime) => {
		ref.runtimeName = r.name;
		const file = ref.storage;
		ref.runtime =
			file?.names !== undefined && file.serial !== undefined && file.serial === r.meta.serial
				? { ...r.meta, names: file.names, namesDnsOnly: false }
				: r.meta;
		ref.crtLists = [...(crtLists.get(r.name) ?? [])].sort();
	};
	const pending: FetchedRuntime[] = [];
	for (const r of runtime) {
		const ref = byPath.get(r.name);
		if (ref && ref.runtime === undefined) attach(ref, r);
		else pending.push(r);
	}
	for (const r of pending) {
		const bare = refs.get(r.name);
		if (!r.name.includes("/") && bare && bare.runtime === undefined) {
			attach(bare, r);
			continue;
		}
		const name = refs.has(basename(r.name)) ? r.name : basename(r.name);
		const ref: ObservedRef = { ref: name, crtLists: [] };
		attach(ref, r);
		refs.set(name, ref);
	}
	return [...refs.values()].sort((a, b) => a.ref.localeCompare(b.ref));
}

/**
 * A listed item whose GET answers 404 (a file with dots in its name put there by other means, dataplaneapi
 * #337; a runtime entry removed meanwhile) is kept with empty metadata rather than failing the endpoint.
 */
async function metaOrEmpty(
	get: () => Promise<SslCertificate>,
	map: (c: SslCertificate) => RefMeta,
): Promise<RefMeta> {
	try {
		return map(await get());
	} catch (e) {
		if (isCertificateeError(e, "ENDPOINT_NOT_FOUND")) return {};
		throw e;
	}
}

const SEPARATE_KEY_NOTE = "the Data Plane API cannot read it from HAProxy (its key is a separate file)";

/** A runtime certificate's metadata; one the API refuses to read (a separate key file, 3.2+) is unreadable. */
async function fetchRuntime(
	client: DataplaneClient,
	name: string,
	signal: AbortSignal,
): Promise<FetchedRuntime> {
	try {
		return { name, meta: await metaOrEmpty(() => client.runtime.get(name, signal), runtimeMeta) };
	} catch (e) {
		if (isCertificateeError(e, "RUNTIME_SEPARATE_KEY"))
			return { name, meta: {}, unreadable: SEPARATE_KEY_NOTE };
		throw e;
	}
}

export interface ObserveOptions {
	/** A TLS handshake by SNI at the endpoint's probe address, when it has one. */
	probe?: (sni: string, signal: AbortSignal) => Promise<ServedCertificate>;
	/** GETs in flight at once. */
	concurrency: number;
	/** The storage directory as haproxy.cfg spells it (see crtListMembership). */
	storageDir?: string;
	/** Given the listings, what the last observation read that still stands (memory.ts); undefined: fetch all. */
	reuse?: (listing: Listed) => Reusable | undefined;
}

/** A storage file's metadata, never fetched when the API would address another file by its name. */
async function fetchStorage(
	client: DataplaneClient,
	item: { storageName: string; file?: string },
	signal: AbortSignal,
): Promise<FetchedStorage> {
	const file = item.file === undefined ? {} : { file: item.file };
	if (!apiAddressable(item.storageName)) {
		return {
			storageName: item.storageName,
			...file,
			meta: {},
			addressedAs: sanitizeStorageName(item.storageName),
		};
	}
	return {
		storageName: item.storageName,
		...file,
		meta: await metaOrEmpty(() => client.storage.get(item.storageName, signal), storageMeta),
	};
}

/**
 * The listings, and every crt-list's entries, crt-store's loads and ssl-f-use frontend's lines (few): what decides
 * what the GETs may skip.
 */
async function fetchListings(client: DataplaneClient, concurrency: number, signal: AbortSignal) {
	const [items, names, lists, stores] = await Promise.all([
		client.storage.list(signal),
		client.runtime.list(signal),
		client.crtLists.lists(signal),
		client.crtStores.stores(signal),
	]);
	// An unnamed store's loads have no URL (its name is ""): its certificates are observed from the runtime only.
	const named = stores.filter((st) => st.name !== "");
	const frontends = frontendsOf(lists);
	const entries = new Array<{ list: string; entries: CrtListEntry[] }>(lists.length);
	const loads = new Array<CrtStore & { loads: CrtLoad[] }>(named.length);
	const uses = new Array<{ frontend: string; uses: SslFrontUse[] }>(frontends.length);
	const jobs = [
		...lists.map((list, k) => async () => {
			entries[k] = { list, entries: await client.crtLists.entries(list, signal) };
		}),
		...named.map((st, k) => async () => {
			loads[k] = { ...st, loads: await client.crtStores.loads(st.name, signal) };
		}),
		...frontends.map((frontend, k) => async () => {
			uses[k] = { frontend, uses: await client.crtStores.frontUses(frontend, signal) };
		}),
	];
	await runJobs(jobs.length, concurrency, (j) => (jobs[j] as () => Promise<void>)());
	const crtListKey = JSON.stringify([entries, loads, uses]);
	return { items, names, lists, entries, loads, uses, crtListKey };
}

/**
 * Files the storage listing skips (a certificate without its key, a key alone) that a ref is made of: read by
 * name anyway (the GET answers), into `byName`; one that answers nothing stays out.
 */
async function fetchUnlisted(
	client: DataplaneClient,
	wanted: readonly string[],
	byName: Map<string, FetchedStorage>,
	concurrency: number,
	signal: AbortSignal,
): Promise<void> {
	const unlisted = [...new Set(wanted)].filter((f) => !byName.has(f));
	const extra = new Array<FetchedStorage>(unlisted.length);
	await runJobs(unlisted.length, concurrency, async (k) => {
		extra[k] = await fetchStorage(client, { storageName: unlisted[k] as string }, signal);
	});
	for (const f of extra) if (Object.keys(f.meta).length > 0) byName.set(f.storageName, f);
}

/**
 * Fetches everything (bounded concurrency) and joins it. Throws the first endpoint error. A storage name the
 * API's sanitiser changes is never fetched: its GET would answer for another file (the keeper's, typically).
 * crt-store loads come from the configuration endpoints; their certificate and key files are read even when
 * the storage listing skips them (a certificate without its key, a key alone). The listings, crt-lists and
 * crt-store loads come first: from them `options.reuse` may hand back the last observation's metadata of the
 * items it knows (incremental observation, memory.ts), which are then not fetched.
 */
export async function observeEndpoint(
	client: DataplaneClient,
	options: ObserveOptions,
	signal: AbortSignal,
): Promise<{
	refs: ObservedRef[];
	crtLists: ObservedCrtList[];
	/** The listed storage files and runtime certificates with their metadata (what the next one may reuse). */
	fetched: { storage: FetchedStorage[]; runtime: FetchedRuntime[]; crtLists: string };
	reused: boolean;
}> {
	const { items, names, entries, loads, uses, crtListKey } = await fetchListings(
		client,
		options.concurrency,
		signal,
	);
	const reuse = options.reuse?.({ storage: items, runtime: names, crtLists: crtListKey });
	const storage = new Array<FetchedStorage>(items.length);
	const runtime = new Array<FetchedRuntime>(names.length);
	// A few workers pull the next GET from one list of all of them: nothing is queued per item (thousands of
	// pending promises per endpoint), and each answer is reduced to its metadata as soon as it arrives.
	await runJobs(items.length + names.length, options.concurrency, async (k) => {
		if (k < items.length) {
			const item = items[k] as (typeof items)[number];
			const known = reuse?.storage(item.storageName);
			storage[k] =
				known !== undefined && known.file === item.file ? known : await fetchStorage(client, item, signal);
			return;
		}
		const name = names[k - items.length] as string;
		runtime[k - items.length] = reuse?.runtime(name) ?? (await fetchRuntime(client, name, signal));
	});
	const dir = options.storageDir;
	const placements = dir === undefined ? [] : [...placeLoads(loads, dir), ...placeFrontUses(uses, dir)];
	// The files of crt-store loads and ssl-f-use pairs are part of their load's ref, never refs of their own.
	const storeFiles = new Set(placements.flatMap((p) => [p.certRef, p.keyRef]).filter((f) => f !== undefined));
	const byName = new Map(storage.map((f) => [f.storageName, f]));
	const placedNames = new Set(placements.map((p) => p.runtimeName));
	const plainRuntime = runtime.filter((r) => !r.name.startsWith("@") && !placedNames.has(r.name));
	const members = crtListMembership(entries, plainRuntime, options.storageDir);
	const separate = separateKeyFiles(plainRuntime, byName, options.storageDir);
	await fetchUnlisted(client, [...storeFiles, ...separate.values()], byName, options.concurrency, signal);
	const served = await servedForUnreadable(placements, byName, runtime, options.probe, signal);
	const plain = joinRefs(
		storage.filter((f) => !storeFiles.has(f.storageName)),
		plainRuntime,
		members,
	);
	return {
		refs: [
			...placeSeparateKeys(plain, separate, byName, entries),
			...placedRefs(placements, byName, runtime, served),
		].sort((a, b) => a.ref.localeCompare(b.ref)),
		crtLists: describeCrtLists(entries, options.storageDir === undefined ? [] : [options.storageDir]),
		fetched: { storage, runtime, crtLists: crtListKey },
		reused: reuse !== undefined,
	};
}
