/**
 * The `haproxy-runtime` target: a HAProxy node reached through its runtime socket, with its certificate
 * files in crt_dir. observe() reads both sides (files, HAProxy's in-memory store and crt-lists) over one
 * connection; apply() performs one Action and reports it as a value; nothing here ever reloads HAProxy.
 */
import { readFile } from "node:fs/promises";
import { dirname, isAbsolute } from "node:path";
import { type Bundle, checkBundle, combinedPem, commonName, keyTypeOf } from "../../certificates/index.js";
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import { probeServed } from "../../probe/index.js";
import {
	type Action,
	type ActionResult,
	type EndpointDriver,
	type EndpointObservation,
	type ObservedCrtList,
	type ObservedRef,
	type RefMeta,
	runtimeNameOf,
	storageDirName,
} from "../../reconcile/model.js";
import { PENDING_RELOAD_NOTE } from "../haproxy/bufsize.js";
import { appendLine, linesMaybeNaming, removeCertificateLines } from "../haproxy/crt-list.js";
import { checkNameRemoval } from "../haproxy/guard.js";
import { describeCrtList, editCrtListFile } from "./crt-list-files.js";
import type { CertDetail } from "./parse.js";
import type { RuntimeTargetConfig } from "./schema.js";
import { RuntimeClient } from "./socket.js";
import {
	type CrtDirCache,
	chainNames,
	leafMeta,
	readCrtDir,
	refPath,
	removeFile,
	removeLeftovers,
	writeAtomic,
} from "./storage.js";
import { addCertificate, updateCertificate } from "./transaction.js";

export { checkNameRemoval } from "../haproxy/guard.js";
export { type RuntimeTargetConfig, runtimeTargetSchema } from "./schema.js";
export { RuntimeClient, type RuntimeClientOptions, type WorkerIdentity } from "./socket.js";
export { abortOpenTransaction, addCertificate, type RuntimeWrite, updateCertificate } from "./transaction.js";

export interface RuntimeEndpointDeps {
	/** A client to share (tests, or one per node across targets); default: one made from the config. */
	client?: RuntimeClient;
	/** Probe handshake timeout. Default 5000 ms. */
	probeTimeoutMs?: number;
	/** The clock: observation times, and refusing expired or not-yet-valid certificates before sending. */
	now?: () => Date;
	/** plan and status: observe() does not remove leftover temp files (it reports them). */
	readOnly?: boolean;
}

/** The driver plus `close()`, which ends its socket connection. */
export type RuntimeEndpoint = EndpointDriver & { close(): Promise<void> };

export function createRuntimeEndpoint(
	config: RuntimeTargetConfig,
	deps: RuntimeEndpointDeps = {},
): RuntimeEndpoint {
	const client =
		deps.client ??
		new RuntimeClient({
			address: config.socket,
			master: config.master_socket,
			name: config.name,
			timeoutMs: config.timeout,
			bufsize: config.bufsize,
		});
	const dirName = storageDirName(config.crt_dir_name ?? config.crt_dir);
	const runtimeName = (ref: string) => runtimeNameOf(dirName, ref);
	const context = { endpoint: config.name, target: config.name };
	const fileCache: CrtDirCache = new Map();
	const now = () => deps.now?.() ?? new Date();
	// The crt-lists of the last observation: the files a storage delete must not leave naming a removed file.
	let crtListFiles: ObservedCrtList[] = [];

	async function observe(signal: AbortSignal): Promise<EndpointObservation> {
		try {
			signal.throwIfAborted();
			const leftovers = (dir: string) => removeLeftovers(dir, now(), { dryRun: deps.readOnly === true });
			const removed = await leftovers(config.crt_dir);
			const worker = await client.checkWorker();
			const [files, list, lists] = await Promise.all([
				readCrtDir(config.crt_dir, fileCache),
				client.showCerts(),
				client.showCrtLists(),
			]);
			const prefix = `${dirName}/`;
			const inDir = list.names.filter((n) => n.startsWith(prefix) && !n.slice(prefix.length).includes("/"));
			// Certificates loaded from elsewhere (a crt line, a crt-list naming other paths) are observed too, so
			// the plan knows who serves a name; they are never written or removed.
			const outside = list.names.filter((n) => !inDir.includes(n) && !n.startsWith("*"));
			// Queued back to back on the one connection: no connection per certificate.
			const [details, outsideDetails, members] = await Promise.all([
				Promise.all(inDir.map((n) => client.showCert(n))),
				Promise.all(outside.map((n) => client.showCert(n))),
				Promise.all(lists.map(async (l) => ({ list: l, entries: (await client.showCrtList(l)) ?? [] }))),
			]);
			signal.throwIfAborted();
			const refs = new Map<string, ObservedRef>();
			const refOf = (ref: string): ObservedRef => {
				let r = refs.get(ref);
				if (!r) {
					r = { ref, runtimeName: runtimeName(ref), crtLists: [] };
					refs.set(ref, r);
				}
				return r;
			};
			for (const [ref, meta] of files) refOf(ref).storage = meta;
			inDir.forEach((name, i) => {
				const detail = details[i];
				if (!detail) return;
				const r = refOf(name.slice(prefix.length));
				r.runtime = runtimeMeta(detail, r.storage);
			});
			outside.forEach((name, i) => {
				const detail = outsideDetails[i];
				if (!detail) return;
				refs.set(name, {
					ref: name,
					runtimeName: name,
					runtime: runtimeMeta(detail, undefined),
					crtLists: [],
					external: `loaded from ${name}, outside crt_dir ${config.crt_dir}: certificatee never writes or removes it; it can only go with a configuration change and a reload`,
				});
			});
			for (const { list: l, entries } of members) {
				for (const e of entries) {
					const r = e.file.startsWith(prefix) ? refs.get(e.file.slice(prefix.length)) : refs.get(e.file);
					if (r && !r.crtLists.includes(l)) r.crtLists.push(l);
				}
			}
			const names = [...refs.values()].filter((r) => r.external === undefined).map((r) => runtimeName(r.ref));
			const crtLists = await Promise.all(
				members.map(({ list: l, entries }) => describeCrtList(l, entries, names, [dirName])),
			);
			crtListFiles = crtLists.filter((l) => l.kind === "file");
			for (const dir of new Set(crtListFiles.filter((l) => l.editable).map((l) => dirname(l.name)))) {
				removed.push(...(await leftovers(dir)));
			}
			return {
				endpoint: config.name,
				ok: true,
				refs: [...refs.values()].sort((x, y) => x.ref.localeCompare(y.ref)),
				observedAt: now(),
				info: {
					...(worker.node ? { node: worker.node } : {}),
					pid: String(worker.pid),
					uptime_sec: String(worker.uptimeSec),
					...(list.transaction ? { open_transaction: list.transaction } : {}),
					...(removed.length > 0
						? { [deps.readOnly ? "leftovers" : "removed_leftovers"]: removed.join(", ") }
						: {}),
				},
				crtLists,
			};
		} catch (e) {
			return { endpoint: config.name, ok: false, error: asError(e, "observe") };
		}
	}

	async function apply(action: Action, signal: AbortSignal): Promise<ActionResult> {
		try {
			signal.throwIfAborted();
			return await perform(action);
		} catch (e) {
			const error = asError(e, action.op);
			const result: ActionResult = { action, ok: false, error };
			if (error.code === "RUNTIME_PAYLOAD_TOO_LARGE") {
				result.note = PENDING_RELOAD_NOTE;
			}
			return result;
		}
	}

	async function perform(action: Action): Promise<ActionResult> {
		switch (action.op) {
			case "storage-create":
			case "storage-replace":
				await writeAtomic(config.crt_dir, action.ref, combinedPem(action.bundle));
				return { action, ok: true };
			case "storage-delete": {
				const namedBy = await crtListFilesNaming(runtimeName(action.ref));
				if (namedBy.length > 0) {
					return {
						action,
						ok: false,
						error: new CertificateeError(
							"ENDPOINT_ERROR",
							`${config.name}: not deleting ${action.ref}: ${namedBy.join(", ")} still name it, and HAProxy's next reload would fail`,
							{
								context: {
									...context,
									ref: action.ref,
									file: namedBy[0] as string,
									operation: "storage-delete",
								},
								hint: "remove its line from the crt-list file first; the next cycle retries",
							},
						),
					};
				}
				return (await removeFile(config.crt_dir, action.ref))
					? { action, ok: true }
					: { action, ok: true, note: "file already gone" };
			}
			case "crt-list-file-remove": {
				const listPath = action.crtList;
				const changed = await editCrtListFile(
					listPath,
					(text) => removeCertificateLines(text, action.runtimeName, { listPath }).text,
				);
				return changed ? { action, ok: true } : { action, ok: true, note: `no line of ${listPath} names it` };
			}
			case "crt-list-file-add": {
				const listPath = action.crtList;
				const changed = await editCrtListFile(listPath, (text) =>
					removeCertificateLines(text, action.runtimeName, { listPath }).removed.length > 0
						? text
						: appendLine(text, action.runtimeName),
				);
				return changed ? { action, ok: true } : { action, ok: true, note: `already in ${listPath}` };
			}
			case "runtime-set": {
				const invalid = checkSendable(action.bundle, action.ref);
				if (invalid) return { action, ok: false, error: invalid };
				const current = await client.showCert(action.runtimeName);
				const refused = current
					? checkNameRemoval({
							current: servedNames(current),
							next: [...action.bundle.leaf.dnsNames, ...action.bundle.leaf.ipAddresses],
							allowNameRemoval: config.allow_name_removal,
							endpoint: config.name,
							ref: action.ref,
						})
					: undefined;
				if (refused) return { action, ok: false, error: refused };
				await updateCertificate(client, action.runtimeName, combinedPem(action.bundle));
				return { action, ok: true };
			}
			case "runtime-add": {
				const invalid = checkSendable(action.bundle, action.ref);
				if (invalid) return { action, ok: false, error: invalid };
				const list = action.crtList || config.crt_list || dirName;
				if (!(await client.showCrtLists()).includes(list)) {
					return {
						action,
						ok: true,
						note: `pending reload: HAProxy has no crt-list "${list}" to add ${action.runtimeName} to; the file on disk is loaded at the next reload`,
					};
				}
				const write = await addCertificate(client, action.runtimeName, combinedPem(action.bundle), list);
				return write.addedToCrtList
					? { action, ok: true }
					: { action, ok: true, note: `already in crt-list ${list}` };
			}
			case "crt-list-remove": {
				const entries = await client.showCrtList(action.crtList);
				if (!entries?.some((e) => e.file === action.runtimeName)) {
					return { action, ok: true, note: `not in crt-list ${action.crtList}` };
				}
				await client.delCrtListEntry(action.crtList, action.runtimeName);
				return { action, ok: true };
			}
			case "runtime-delete": {
				if ((await client.showCert(action.runtimeName)) === undefined) {
					return { action, ok: true, note: "not in HAProxy's store" };
				}
				await client.delCert(action.runtimeName);
				return { action, ok: true };
			}
			case "runtime-reinsert":
				return reinsert(action);
			default: {
				const never: never = action;
				throw new Error(`unknown action ${JSON.stringify(never)}`);
			}
		}
	}

	/** The crt-list files on disk whose lines name `name` now (read again: the last observation may be old). */
	async function crtListFilesNaming(name: string): Promise<string[]> {
		const naming: string[] = [];
		for (const list of crtListFiles) {
			if (!list.editable) {
				if ((list.lines?.[name]?.length ?? 0) > 0) naming.push(list.name);
				continue;
			}
			const text = await readFile(list.name, "utf8").catch((e: NodeJS.ErrnoException) => {
				if (e.code === "ENOENT") return "";
				throw e;
			});
			if (linesMaybeNaming(text, name, { listPath: list.name }).length > 0) naming.push(list.name);
		}
		return naming;
	}

	/**
	 * Commits a ref again with the content HAProxy already holds (its file, when the file holds the same leaf
	 * and chain), so its SNI entries go behind the keeper just written. Never sends other content.
	 */
	async function reinsert(action: Extract<Action, { op: "runtime-reinsert" }>): Promise<ActionResult> {
		const held = await client.showCert(action.runtimeName);
		if (held === undefined) return { action, ok: true, note: "not in HAProxy's store" };
		// A ref outside crt_dir is named by its absolute path: read there (never written).
		const path =
			action.ref === action.runtimeName && isAbsolute(action.ref)
				? action.ref
				: refPath(config.crt_dir, action.ref);
		const pem = await readFile(path, "utf8").catch(() => undefined);
		const fileChain = pem === undefined ? [] : chainNames(pem);
		const sameChain =
			fileChain.length === held.chain.length &&
			fileChain.every(
				(c, i) =>
					c.subject === commonName(held.chain[i]?.subject ?? "") &&
					c.issuer === commonName(held.chain[i]?.issuer ?? ""),
			);
		if (pem === undefined || leafMeta(pem).sha1 !== held.sha1 || !sameChain) {
			const error = new CertificateeError(
				"ENDPOINT_ERROR",
				`${config.name}: cannot re-insert ${action.runtimeName}: its file does not hold what HAProxy serves`,
				{
					context: { ...context, ref: action.ref, operation: action.op },
					hint: "the names it shares with the keeper are served by it until it is removed or a reload",
				},
			);
			return { action, ok: false, error };
		}
		await updateCertificate(client, action.runtimeName, pem);
		return { action, ok: true };
	}

	/** HAProxy accepts expired certificates: certificatee checks dates (and chain) itself. */
	function checkSendable(bundle: Bundle, ref: string): CertificateeError | undefined {
		const now = deps.now?.() ?? new Date();
		return checkBundle(bundle, { source: `${config.name} ${ref}`, now })[0];
	}

	function asError(e: unknown, operation: string): CertificateeError {
		if (isCertificateeError(e)) return e;
		return new CertificateeError(
			"ENDPOINT_ERROR",
			`${config.name}: ${operation} failed: ${describeError(e)}`,
			{
				context: { ...context, operation },
				cause: e,
			},
		);
	}

	const driver: RuntimeEndpoint = {
		name: config.name,
		reinserts: true,
		observe,
		apply,
		close: () => client.close(),
	};
	const probeAddress = config.probe;
	if (probeAddress !== undefined) {
		driver.probe = (sni, signal, keyType) =>
			probeServed({
				address: probeAddress,
				sni,
				signal,
				timeoutMs: deps.probeTimeoutMs ?? 5_000,
				...(keyType ? { keyType } : {}),
			});
	}
	return driver;
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
function servedNames(detail: CertDetail): string[] {
	if (detail.sans.length > 0) return [...new Set(detail.sans)].sort();
	const cn = /(?:^|\/)CN=([^/]+)/.exec(detail.subject ?? "")?.[1];
	return cn ? [cn.toLowerCase()] : [];
}
