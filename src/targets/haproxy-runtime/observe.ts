/**
 * observe() of a haproxy-runtime endpoint: both sides read in full before anything is decided — the files
 * in crt_dir, and HAProxy's in-memory store and crt-lists over the one connection (requests queued back to
 * back, no connection per certificate). Leftover temp files of a killed writer are removed (or, read-only,
 * reported).
 */

import { dirname } from "node:path";
import { keyTypeOf } from "../../certificates/index.js";
import { isCertificateeError } from "../../errors.js";
import type { RefMeta } from "../../reconcile/model.js";
import {
	desiredChanged,
	fullIsDue,
	observationKind,
	scheduledFull,
	sinceFullAfter,
} from "../haproxy/engine/full-schedule.js";
import type {
	EndpointObservation,
	ObservedCrtList,
	ObservedRef,
	ObserveLook,
} from "../haproxy/engine/model.js";
import { endpointError, type RuntimeContext, untouched } from "./context.js";
import { describeCrtList } from "./crt-list-files.js";
import { readHaproxyCfg } from "./haproxy-config.js";
import { finishPairWrites } from "./pair.js";
import type { CertDetail, CertList, CrtListEntry } from "./parse.js";
import { type PlaceInput, placeRefs } from "./placement.js";
import type { WorkerIdentity } from "./session.js";
import { type CrtDirLayout, readCrtDir, removeLeftovers } from "./storage.js";

/**
 * haproxy_config as read, or why it cannot be: only the refs that depend on it are refused then (placement.ts),
 * the endpoint's others are observed and written as ever.
 */
async function configHaproxyRuns(ctx: RuntimeContext): Promise<Pick<PlaceInput, "cfg" | "cfgError">> {
	const paths = ctx.config.haproxy_config;
	if (paths === undefined) return {};
	try {
		return { cfg: await readHaproxyCfg(paths, ctx.cfgCache, ctx.config.name) };
	} catch (e) {
		if (isCertificateeError(e, "HAPROXY_CONFIG_INVALID")) return { cfgError: e };
		throw e;
	}
}

/** What HAProxy and crt_dir hold, as read. */
interface Held {
	worker: WorkerIdentity;
	files: Map<string, RefMeta>;
	list: CertList;
	/** Store names in crt_dir, with their detail (undefined: gone between listing and detail). */
	inDir: Array<[string, CertDetail | undefined]>;
	/** Store names loaded from elsewhere (a crt line, a crt-list naming other paths). */
	outside: Array<[string, CertDetail | undefined]>;
	members: Array<{ list: string; entries: CrtListEntry[] }>;
	/** crt_dir's names and keyless files. */
	layout: CrtDirLayout;
	/** `acme status` (3.2+): certificate name -> acme section. */
	acme: ReadonlyMap<string, string>;
	/** Every detail and list member read now ("full"), or only what can have changed ("incremental"). */
	observation: string;
}

export async function observeRuntime(
	ctx: RuntimeContext,
	signal: AbortSignal,
	look?: ObserveLook,
): Promise<EndpointObservation> {
	try {
		signal.throwIfAborted();
		// A pair write a killed writer left half done is finished before anything is read (pair.ts).
		const pairs = await finishPairWrites(ctx.config.crt_dir, { dryRun: ctx.readOnly });
		const leftovers = (dir: string) => removeLeftovers(dir, ctx.now(), { dryRun: ctx.readOnly });
		const removed = await leftovers(ctx.config.crt_dir);
		const held = await readHeld(ctx, look?.desired);
		signal.throwIfAborted();
		const refs = collectRefs(held, `${ctx.dirName}/`, ctx.runtimeName, ctx.config.crt_dir);
		await placeRefs(refs, {
			...(await configHaproxyRuns(ctx)),
			config: ctx.config,
			dirName: ctx.dirName,
			details: new Map([...held.inDir, ...held.outside]),
			layout: held.layout,
			acme: held.acme,
			cache: ctx.placementCache,
		});
		const names = [...refs.values()]
			.filter((r) => r.external === undefined)
			.map((r) => r.runtimeName ?? ctx.runtimeName(r.ref));
		const crtLists = await Promise.all(
			held.members.map(({ list, entries }) => describeCrtList(list, entries, names, [ctx.dirName])),
		);
		ctx.crtListFiles = crtLists.filter((l) => l.kind === "file");
		for (const dir of [
			...editableListDirs(ctx.crtListFiles),
			...placedDirs(refs.values(), ctx.config.crt_dir),
		]) {
			removed.push(...(await leftovers(dir)));
		}
		return {
			endpoint: ctx.config.name,
			ok: true,
			refs: [...refs.values()].sort((x, y) => x.ref.localeCompare(y.ref)),
			observedAt: ctx.now(),
			info: {
				...observationInfo(held, removed, ctx.readOnly),
				...(pairs.length > 0
					? { [ctx.readOnly ? "half_done_pairs" : "finished_pairs"]: pairs.join(", ") }
					: {}),
			},
			crtLists,
		};
	} catch (e) {
		ctx.memory = undefined;
		return { endpoint: ctx.config.name, ok: false, error: endpointError(ctx, e, "observe") };
	}
}

/**
 * The worker first, then the files, the store listing and the crt-lists; then every detail and list member
 * (a full observation), or, when nothing but certificatee's own writes can have changed since the last one,
 * only the details of the stores it wrote (the rest as the last observation read them). See fullBecause().
 */
async function readHeld(ctx: RuntimeContext, desired: string | undefined): Promise<Held> {
	const { client } = ctx;
	const worker = await client.checkWorker();
	const changedFiles = new Set<string>();
	const layout: CrtDirLayout = { names: new Set(), keyless: new Set() };
	const [files, list, lists] = await Promise.all([
		readCrtDir(ctx.config.crt_dir, ctx.fileCache, changedFiles, layout),
		client.showCerts(),
		client.showCrtLists(),
	]);
	const prefix = `${ctx.dirName}/`;
	const inDir = list.names.filter((n) => n.startsWith(prefix) && !n.slice(prefix.length).includes("/"));
	// Certificates loaded from elsewhere are observed too, so the plan knows who serves a name; they are never
	// written or removed.
	const inDirSet = new Set(inDir);
	const outside = list.names.filter((n) => !inDirSet.has(n) && !n.startsWith("*"));
	const memory = ctx.memory;
	const full = fullBecause(ctx, { worker, list, lists, changedFiles, desired });
	const touched = ctx.touched;
	ctx.touched = untouched();
	const detailOf = (n: string) =>
		full === undefined && memory?.details.has(n) && !touched.names.has(n)
			? memory.details.get(n)
			: client.showCert(n);
	const [details, outsideDetails, members, acme] = await Promise.all([
		Promise.all(inDir.map(detailOf)),
		Promise.all(outside.map(detailOf)),
		full === undefined && memory
			? memory.members.map((m) => ({ list: m.list, entries: [...m.entries] }))
			: Promise.all(lists.map(async (l) => ({ list: l, entries: (await client.showCrtList(l)) ?? [] }))),
		full === undefined && memory ? memory.acme : client.acmeStatus(),
	]);
	const held: Held = {
		worker,
		files,
		list,
		inDir: inDir.map((n, i) => [n, details[i]]),
		outside: outside.map((n, i) => [n, outsideDetails[i]]),
		members,
		layout,
		acme,
		observation: observationKind(full, memory?.sinceFull, ctx.config.full_observation_every),
	};
	ctx.memory = {
		worker,
		names: new Set(list.names),
		lists,
		details: new Map([...held.inDir, ...held.outside]),
		members,
		acme,
		sinceFull: sinceFullAfter(memory?.sinceFull, full, ctx.config.full_observation_every, ctx.fullPhase),
		...(desired === undefined ? {} : { desired }),
	};
	return held;
}

/**
 * Why this observation must read everything again, or undefined when the last one can be reused for all but
 * certificatee's own writes: it is not the first, not the full_observation_every-th, certificatee changed
 * nothing but files and certificate contents (no failed write), and nothing changed behind its back that shows
 * without reading every detail: the same worker, no open transaction, the same store names and crt-lists, no
 * file in crt_dir changed that certificatee did not write. A certificate replaced behind its back through the
 * socket alone is seen at the next full observation.
 */
function fullBecause(
	ctx: RuntimeContext,
	now: {
		worker: WorkerIdentity;
		list: CertList;
		lists: readonly string[];
		changedFiles: ReadonlySet<string>;
		/** desiredKey() of this cycle's desired set: a changed one defers a due scheduled full observation once. */
		desired: string | undefined;
	},
): string | undefined {
	const memory = ctx.memory;
	if (memory === undefined) return "first";
	if (
		fullIsDue(
			memory.sinceFull,
			ctx.config.full_observation_every,
			desiredChanged(memory.desired, now.desired),
		)
	) {
		return scheduledFull(ctx.config.full_observation_every);
	}
	if (ctx.touched.all) return "certificatee changed stores or crt-lists, or a write failed";
	if (now.worker.pid !== memory.worker.pid || now.worker.node !== memory.worker.node) return "worker changed";
	if (now.worker.uptimeSec < memory.worker.uptimeSec) return "worker restarted";
	if (now.list.transaction !== undefined) return "a transaction is open";
	if (now.list.names.length !== memory.names.size || now.list.names.some((n) => !memory.names.has(n))) {
		return "store names changed";
	}
	if (now.lists.length !== memory.lists.length || now.lists.some((l, i) => l !== memory.lists[i])) {
		return "crt-lists changed";
	}
	const foreign = [...now.changedFiles].find((ref) => !ctx.touched.files.has(ref));
	if (foreign !== undefined) return `${foreign} changed in crt_dir`;
	return undefined;
}

/** One ObservedRef per file in crt_dir and per certificate HAProxy holds, with the crt-lists naming it. Pure. */
export function collectRefs(
	held: Pick<Held, "files" | "inDir" | "outside" | "members">,
	prefix: string,
	runtimeName: (ref: string) => string,
	crtDir: string,
): Map<string, ObservedRef> {
	const refs = new Map<string, ObservedRef>();
	const refOf = (ref: string): ObservedRef => {
		let r = refs.get(ref);
		if (!r) {
			r = { ref, runtimeName: runtimeName(ref), crtLists: [] };
			refs.set(ref, r);
		}
		return r;
	};
	for (const [ref, meta] of held.files) refOf(ref).storage = meta;
	for (const [name, detail] of held.inDir) {
		if (!detail) continue;
		const r = refOf(name.slice(prefix.length));
		r.runtime = runtimeMeta(detail, r.storage);
	}
	for (const [name, detail] of held.outside) {
		if (!detail) continue;
		refs.set(name, {
			ref: name,
			runtimeName: name,
			runtime: runtimeMeta(detail, undefined),
			crtLists: [],
			external: `loaded from ${name}, outside crt_dir ${crtDir}: certificatee never writes or removes it; it can only go with a configuration change and a reload`,
		});
	}
	for (const { list, entries } of held.members) {
		for (const e of entries) {
			const r = e.file.startsWith(prefix) ? refs.get(e.file.slice(prefix.length)) : refs.get(e.file);
			if (r && !r.crtLists.includes(list)) r.crtLists.push(list);
		}
	}
	return refs;
}

/** The directories of placed files outside crt_dir: a killed pair write leaves its temp files there. */
function placedDirs(refs: Iterable<ObservedRef>, crtDir: string): Set<string> {
	const dirs = new Set<string>();
	for (const r of refs) {
		const p = r.placement;
		if (r.external !== undefined || p === undefined) continue;
		for (const f of [p.certFile, p.key?.file]) if (f !== undefined) dirs.add(dirname(f));
	}
	dirs.delete(crtDir.replace(/\/+$/, ""));
	return dirs;
}

/** The directories of the crt-list files certificatee edits: a killed edit leaves its temp file there. */
function editableListDirs(files: readonly ObservedCrtList[]): Set<string> {
	return new Set(files.filter((l) => l.editable).map((l) => dirname(l.name)));
}

/** The worker as an observation's `info` names it. */
export function workerInfo(worker: WorkerIdentity): Record<string, string> {
	return {
		...(worker.node ? { node: worker.node } : {}),
		pid: String(worker.pid),
		uptime_sec: String(worker.uptimeSec),
	};
}

function observationInfo(held: Held, removed: readonly string[], readOnly: boolean): Record<string, string> {
	const { worker, list } = held;
	return {
		...workerInfo(worker),
		observation: held.observation,
		...(list.transaction ? { open_transaction: list.transaction } : {}),
		...(removed.length > 0 ? { [readOnly ? "leftovers" : "removed_leftovers"]: removed.join(", ") } : {}),
	};
}

/**
 * HAProxy's view of a certificate. Its listing prints DNS names only: when the file holds the same leaf, the
 * file's names (IP SANs included) are the certificate's; otherwise the names are marked DNS-only.
 */
function runtimeMeta(detail: CertDetail, file: RefMeta | undefined): RefMeta {
	const sameLeaf = file?.sha1 !== undefined && file.sha1 === detail.sha1 && file.names !== undefined;
	const meta: RefMeta = {
		status: detail.status,
		...(sameLeaf ? { names: file.names } : { names: servedNames(detail), namesDnsOnly: true }),
		chain: { kind: "names", pairs: detail.chain },
	};
	if (detail.serial) meta.serial = detail.serial;
	if (detail.sha1) meta.sha1 = detail.sha1;
	if (detail.notAfter) meta.notAfter = detail.notAfter;
	if (detail.algorithm) meta.keyType = keyTypeOf(detail.algorithm);
	return meta;
}

/** The names HAProxy derives SNI entries from: the DNS SANs, or the CN when there are none. */
export function servedNames(detail: CertDetail): string[] {
	if (detail.sans.length > 0) return [...new Set(detail.sans)].sort();
	const cn = /(?:^|\/)CN=([^/]+)/.exec(detail.subject ?? "")?.[1];
	return cn ? [cn.toLowerCase()] : [];
}
