/**
 * observe() of a haproxy-runtime endpoint: both sides read in full before anything is decided — the files
 * in crt_dir, and HAProxy's in-memory store and crt-lists over the one connection (requests queued back to
 * back, no connection per certificate). Leftover temp files of a killed writer are removed (or, read-only,
 * reported).
 */
import { dirname } from "node:path";
import { keyTypeOf } from "../../certificates/index.js";
import type { EndpointObservation, ObservedCrtList, ObservedRef, RefMeta } from "../../reconcile/model.js";
import { endpointError, type RuntimeContext } from "./context.js";
import { describeCrtList } from "./crt-list-files.js";
import type { CertDetail, CertList, CrtListEntry } from "./parse.js";
import type { WorkerIdentity } from "./session.js";
import { readCrtDir, removeLeftovers } from "./storage.js";

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
}

export async function observeRuntime(ctx: RuntimeContext, signal: AbortSignal): Promise<EndpointObservation> {
	try {
		signal.throwIfAborted();
		const leftovers = (dir: string) => removeLeftovers(dir, ctx.now(), { dryRun: ctx.readOnly });
		const removed = await leftovers(ctx.config.crt_dir);
		const held = await readHeld(ctx);
		signal.throwIfAborted();
		const refs = collectRefs(held, `${ctx.dirName}/`, ctx.runtimeName, ctx.config.crt_dir);
		const names = [...refs.values()]
			.filter((r) => r.external === undefined)
			.map((r) => ctx.runtimeName(r.ref));
		const crtLists = await Promise.all(
			held.members.map(({ list, entries }) => describeCrtList(list, entries, names, [ctx.dirName])),
		);
		ctx.crtListFiles = crtLists.filter((l) => l.kind === "file");
		for (const dir of editableListDirs(ctx.crtListFiles)) removed.push(...(await leftovers(dir)));
		return {
			endpoint: ctx.config.name,
			ok: true,
			refs: [...refs.values()].sort((x, y) => x.ref.localeCompare(y.ref)),
			observedAt: ctx.now(),
			info: observationInfo(held, removed, ctx.readOnly),
			crtLists,
		};
	} catch (e) {
		return { endpoint: ctx.config.name, ok: false, error: endpointError(ctx, e, "observe") };
	}
}

/** The worker first, then the files, the store listing and the crt-lists, then every detail and list member. */
async function readHeld(ctx: RuntimeContext): Promise<Held> {
	const { client } = ctx;
	const worker = await client.checkWorker();
	const [files, list, lists] = await Promise.all([
		readCrtDir(ctx.config.crt_dir, ctx.fileCache),
		client.showCerts(),
		client.showCrtLists(),
	]);
	const prefix = `${ctx.dirName}/`;
	const inDir = list.names.filter((n) => n.startsWith(prefix) && !n.slice(prefix.length).includes("/"));
	// Certificates loaded from elsewhere are observed too, so the plan knows who serves a name; they are never
	// written or removed.
	const outside = list.names.filter((n) => !inDir.includes(n) && !n.startsWith("*"));
	const [details, outsideDetails, members] = await Promise.all([
		Promise.all(inDir.map((n) => client.showCert(n))),
		Promise.all(outside.map((n) => client.showCert(n))),
		Promise.all(lists.map(async (l) => ({ list: l, entries: (await client.showCrtList(l)) ?? [] }))),
	]);
	return {
		worker,
		files,
		list,
		inDir: inDir.map((n, i) => [n, details[i]]),
		outside: outside.map((n, i) => [n, outsideDetails[i]]),
		members,
	};
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

/** The directories of the crt-list files certificatee edits: a killed edit leaves its temp file there. */
function editableListDirs(files: readonly ObservedCrtList[]): Set<string> {
	return new Set(files.filter((l) => l.editable).map((l) => dirname(l.name)));
}

function observationInfo(held: Held, removed: readonly string[], readOnly: boolean): Record<string, string> {
	const { worker, list } = held;
	return {
		...(worker.node ? { node: worker.node } : {}),
		pid: String(worker.pid),
		uptime_sec: String(worker.uptimeSec),
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
