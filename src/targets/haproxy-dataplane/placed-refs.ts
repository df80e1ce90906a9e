/**
 * The refs of certificates whose files HAProxy's configuration names (crt-store loads, ssl-f-use lines with a
 * key argument): one per load or line, its
 * certificate and key files part of it, and what stands for HAProxy's memory when the API cannot read it. Pure,
 * but for the probe of `servedForUnreadable`.
 */
import { nameSet } from "../../certificates/names.js";
import type { RefMeta, ServedCertificate } from "../../reconcile/model.js";
import type { ObservedRef, Placement } from "../haproxy/engine/model.js";
import type { LoadPlacement } from "./crt-stores.js";
import type { FetchedRuntime, FetchedStorage } from "./memory.js";

function placedBy(p: LoadPlacement): string {
	return p.frontend === undefined
		? `crt-store load ${p.runtimeName}`
		: `ssl-f-use crt ${p.runtimeName} in frontend ${p.frontend}`;
}

/**
 * The refs of crt-store loads and of ssl-f-use lines with a key argument: one per load (or line), named by its
 * certificate file's storage name (else by HAProxy's `@store/alias` name), holding HAProxy's runtime entry, the storage metadata of its certificate file and its
 * placement (files, key argument, HAProxy's ACME, or why it cannot be written). Its key file is part of it:
 * when certificatee wrote the pair, the key file holds the leaf too, and one that holds another leaf
 * (a pair half written) is a key mismatch, written again. HAProxy's memory of a pair cannot be read through the
 * API on 3.2+ (RUNTIME_SEPARATE_KEY): what the endpoint's probe address serves for its first name stands in for it
 * (the certificate it serves, when that covers the pair's names), else what the certificate file holds.
 * A runtime `@…` name no load explains (an unnamed store, whose loads have no URL, or a server before v3.2) is
 * observed only (`external`).
 */
export function placedRefs(
	placements: readonly LoadPlacement[],
	storage: ReadonlyMap<string, FetchedStorage>,
	runtime: readonly FetchedRuntime[],
	served: ReadonlyMap<string, RefMeta> = new Map(),
): ObservedRef[] {
	const held = new Map(runtime.map((r) => [r.name, r]));
	const refs: ObservedRef[] = [];
	const placed = new Set<string>();
	for (const p of placements) {
		placed.add(p.runtimeName);
		const r = held.get(p.runtimeName);
		const file = p.certRef === undefined ? undefined : storage.get(p.certRef)?.meta;
		if (r === undefined && file === undefined) continue;
		const keyHolds = p.keyRef === undefined ? undefined : storage.get(p.keyRef)?.meta.serial;
		const meta =
			file !== undefined && keyHolds !== undefined && file.serial !== undefined && keyHolds !== file.serial
				? { ...file, keyMismatch: true as const }
				: file;
		// What HAProxy serves for the pair's names stands in for its unreadable memory; without a probe, its files.
		const stand = served.get(p.runtimeName) ?? (file ? { ...file, status: "Used" } : undefined);
		const placement: Placement = {
			via: p.frontend === undefined ? "crt-store" : "ssl-f-use",
			...(p.certFile === undefined ? {} : { certFile: p.certFile }),
			...(p.keyFile === undefined ? {} : { key: { file: p.keyFile, by: "argument" as const } }),
			extras: {},
			...(p.acme === undefined ? {} : { acme: p.acme }),
			...(p.unwritable === undefined ? {} : { unknown: `${placedBy(p)}: ${p.unwritable}` }),
		};
		const runtimeMeta = r === undefined ? undefined : r.unreadable ? (stand ?? r.meta) : r.meta;
		refs.push({
			ref: p.certRef ?? p.runtimeName,
			runtimeName: p.runtimeName,
			...(meta === undefined ? {} : { storage: meta }),
			...(runtimeMeta === undefined ? {} : { runtime: runtimeMeta }),
			crtLists: [],
			placement,
		});
	}
	for (const r of runtime) {
		if (!r.name.startsWith("@") || placed.has(r.name)) continue;
		refs.push({
			ref: r.name,
			runtimeName: r.name,
			runtime: r.meta,
			crtLists: [],
			external: `crt-store certificate ${r.name}: the Data Plane API shows no load for it (an unnamed crt-store, or a server before v3.2)`,
		});
	}
	return refs;
}

/**
 * For each placed load whose memory the API cannot read, what HAProxy serves for its certificate file's first
 * DNS name (not a wildcard), when that certificate covers exactly the file's names. A failed handshake says nothing.
 */
export async function servedForUnreadable(
	placements: readonly LoadPlacement[],
	storage: ReadonlyMap<string, FetchedStorage>,
	runtime: readonly FetchedRuntime[],
	probe: ((sni: string, signal: AbortSignal) => Promise<ServedCertificate>) | undefined,
	signal: AbortSignal,
): Promise<Map<string, RefMeta>> {
	const out = new Map<string, RefMeta>();
	if (probe === undefined) return out;
	const unreadable = new Set(runtime.filter((r) => r.unreadable).map((r) => r.name));
	for (const p of placements) {
		const names = p.certRef === undefined ? undefined : storage.get(p.certRef)?.meta.names;
		const sni = names?.find((n) => !n.startsWith("*.") && !/^[\d.:]+$/.test(n));
		if (!unreadable.has(p.runtimeName) || names === undefined || sni === undefined) continue;
		const seen = await probe(sni, signal).catch(() => undefined);
		if (seen === undefined || nameSet(seen.names).join(",") !== names.join(",")) continue;
		out.set(p.runtimeName, {
			serial: seen.serial,
			names: nameSet(seen.names),
			notAfter: seen.notAfter,
			...(seen.keyType ? { keyType: seen.keyType } : {}),
			status: "Used",
		});
	}
	return out;
}
