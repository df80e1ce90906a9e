/**
 * apply() of a haproxy-runtime endpoint: one HaproxyAction, performed on the files in crt_dir, a crt-list file or
 * HAProxy's memory, and reported as a value (never thrown). Nothing here reloads HAProxy.
 */

import { readFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { type Bundle, checkBundle, combinedPem } from "../../certificates/index.js";
import { CertificateeError } from "../../errors.js";
import { metaOf } from "../../reconcile/leaf-meta.js";
import type { ActionResult } from "../../reconcile/model.js";
import { PENDING_RELOAD_NOTE } from "../haproxy/bufsize.js";
import { appendLine, linesMaybeNaming, removeCertificateLines } from "../haproxy/crt-list.js";
import type { HaproxyAction } from "../haproxy/engine/model.js";
import { checkNameRemoval } from "../haproxy/guard.js";
import { endpointError, type RuntimeContext } from "./context.js";
import { editCrtListFile } from "./crt-list-files.js";
import { servedNames } from "./observe.js";
import { writePlaced } from "./pair.js";
import type { CertDetail } from "./parse.js";
import { reinsert } from "./reinsert.js";
import { crtListOptions } from "./schema.js";
import { removeFile, writeAtomic, writeAtomicMany } from "./storage.js";
import { addCertificate, updateCertificate, updateCertificates } from "./transaction.js";

type ActionOf<Op extends HaproxyAction["op"]> = Extract<HaproxyAction, { op: Op }>;

export async function applyRuntimeAction(
	ctx: RuntimeContext,
	action: HaproxyAction,
	signal: AbortSignal,
): Promise<ActionResult> {
	try {
		signal.throwIfAborted();
		const result = await perform(ctx, action);
		if (!result.ok) ctx.touched.all = true;
		return result;
	} catch (e) {
		return failed(ctx, action, e);
	}
}

/** What applyRuntimeBatch() takes: storage writes (written and fsynced together) and runtime sets (back to back). */
export const BATCHED_OPS: ReadonlySet<HaproxyAction["op"]> = new Set([
	"storage-create",
	"storage-replace",
	"runtime-set",
]);

/**
 * Several actions on distinct refs, independent of each other (targets/haproxy/engine/batches.ts), each reported as
 * applyRuntimeAction() would: storage writes durable together (one directory fsync) before this returns;
 * runtime sets in order in one turn of the node's writer. Any other op: one at a time.
 */
export async function applyRuntimeBatch(
	ctx: RuntimeContext,
	actions: readonly HaproxyAction[],
	signal: AbortSignal,
): Promise<ActionResult[]> {
	const storage = actions.filter((a): a is ActionOf<"storage-create" | "storage-replace"> =>
		isStorageWrite(a),
	);
	const sets = actions.filter((a): a is ActionOf<"runtime-set"> => a.op === "runtime-set");
	if (storage.length + sets.length !== actions.length || (storage.length > 0 && sets.length > 0)) {
		const results: ActionResult[] = [];
		for (const action of actions) results.push(await applyRuntimeAction(ctx, action, signal));
		return results;
	}
	try {
		signal.throwIfAborted();
		for (const action of actions) noteTouched(ctx, action);
		const results =
			storage.length > 0 ? await writeStorageBatch(ctx, storage) : await setRuntimeBatch(ctx, sets);
		if (results.some((r) => !r.ok)) ctx.touched.all = true;
		return results;
	} catch (e) {
		return actions.map((action) => failed(ctx, action, e));
	}
}

function isStorageWrite(a: HaproxyAction): a is ActionOf<"storage-create" | "storage-replace"> {
	return a.op === "storage-create" || a.op === "storage-replace";
}

/**
 * What the next observation must read again (observe.ts): the file, or the store, this action changes;
 * anything else (a store added or removed, a crt-list) makes it a full observation.
 */
function noteTouched(ctx: RuntimeContext, action: HaproxyAction): void {
	switch (action.op) {
		case "storage-create":
		case "storage-replace":
		case "storage-delete":
			ctx.touched.files.add(action.ref);
			// A placed write changes files of crt_dir by their own names (a crt-store's a.crt).
			for (const f of action.op === "storage-replace" ? (action.files?.files ?? []) : []) {
				if (dirname(f.path) === ctx.config.crt_dir.replace(/\/+$/, ""))
					ctx.touched.files.add(basename(f.path));
			}
			return;
		case "runtime-set":
		case "runtime-reinsert":
			ctx.touched.names.add(action.runtimeName);
			return;
		default:
			ctx.touched.all = true;
	}
}

/** A failed action as a value (the next observation is a full one); one too large for the socket waits for a reload. */
function failed(ctx: RuntimeContext, action: HaproxyAction, e: unknown): ActionResult {
	ctx.touched.all = true;
	const error = endpointError(ctx, e, action.op);
	const result: ActionResult = { action, ok: false, error };
	if (error.code === "RUNTIME_PAYLOAD_TOO_LARGE") {
		result.note = PENDING_RELOAD_NOTE;
		result.reloadNeeded = "too-large";
	}
	return result;
}

async function writeStorageBatch(
	ctx: RuntimeContext,
	all: ReadonlyArray<ActionOf<"storage-create" | "storage-replace">>,
): Promise<ActionResult[]> {
	const placed = all.filter((a) => !isPlain(ctx, a));
	if (placed.length > 0) {
		const plain = all.filter((a) => isPlain(ctx, a));
		const results = new Map<HaproxyAction, ActionResult>();
		for (const [i, r] of (await writeStorageBatch(ctx, plain)).entries())
			results.set(plain[i] as HaproxyAction, r);
		for (const a of placed) {
			results.set(a, await writeStorage(ctx, a).catch((e: unknown) => failed(ctx, a, e)));
		}
		return all.map((a) => results.get(a) as ActionResult);
	}
	const actions = all;
	const errors = await writeAtomicMany(
		ctx.config.crt_dir,
		actions.map((a) => ({
			ref: a.ref,
			content: combinedPem(a.bundle),
			meta: metaOf(a.bundle.leaf, a.bundle.chain),
		})),
		ctx.fileCache,
	);
	return actions.map((action, i) => {
		const error = errors[i];
		return error ? failed(ctx, action, error) : { action, ok: true };
	});
}

/** setRuntime() for several refs: the checks first (current content read pipelined), then one batch of writes. */
async function setRuntimeBatch(
	ctx: RuntimeContext,
	actions: ReadonlyArray<ActionOf<"runtime-set">>,
): Promise<ActionResult[]> {
	const invalid = actions.map((a) => checkSendable(ctx, a.bundle, a.ref));
	const current = await Promise.all(
		actions.map((a, i) => (invalid[i] ? undefined : ctx.client.showCert(a.runtimeName))),
	);
	const results: Array<ActionResult | undefined> = actions.map((action, i) => {
		const refused = invalid[i] ?? nameRemovalRefused(ctx, action, current[i]);
		return refused ? { action, ok: false, error: refused } : undefined;
	});
	const toWrite = actions.flatMap((action, i) => (results[i] === undefined ? [{ action, i }] : []));
	const written = await updateCertificates(
		ctx.client,
		toWrite.map(({ action }) => ({
			name: action.runtimeName,
			pem: combinedPem(action.bundle),
			expected: { serial: action.bundle.leaf.serial, sha1: action.bundle.leaf.sha1 },
		})),
	);
	for (const [n, { action, i }] of toWrite.entries()) {
		const w = written[n];
		results[i] = w instanceof Error || w === undefined ? failed(ctx, action, w) : { action, ok: true };
	}
	return results as ActionResult[];
}

function perform(ctx: RuntimeContext, action: HaproxyAction): Promise<ActionResult> {
	noteTouched(ctx, action);
	switch (action.op) {
		case "storage-create":
		case "storage-replace":
			return writeStorage(ctx, action);
		case "storage-delete":
			return deleteStorage(ctx, action);
		case "crt-list-file-remove":
			return removeFromCrtListFile(action);
		case "crt-list-file-add":
			return addToCrtListFile(ctx, action);
		case "runtime-set":
			return setRuntime(ctx, action);
		case "runtime-add":
			return addRuntime(ctx, action);
		case "crt-list-remove":
			return removeFromCrtList(ctx, action);
		case "runtime-delete":
			return deleteRuntime(ctx, action);
		case "runtime-reinsert":
			return reinsert(ctx, action);
		default: {
			const never: never = action;
			throw new Error(`unknown action ${JSON.stringify(never)}`);
		}
	}
}

async function writeStorage(
	ctx: RuntimeContext,
	action: ActionOf<"storage-create" | "storage-replace">,
): Promise<ActionResult> {
	if (action.op === "storage-replace" && action.files !== undefined && !isPlain(ctx, action)) {
		await writePlaced(action.files, action.bundle, ctx.config.crt_dir);
		return { action, ok: true };
	}
	await writeAtomic(ctx.config.crt_dir, action.ref, combinedPem(action.bundle));
	return { action, ok: true };
}

/** A placed write that is one combined PEM named `ref` in crt_dir and nothing else: the batched path takes it. */
function isPlain(ctx: RuntimeContext, action: ActionOf<"storage-create" | "storage-replace">): boolean {
	const files = action.op === "storage-replace" ? action.files : undefined;
	if (files === undefined) return true;
	const [only, ...rest] = files.files;
	return (
		rest.length === 0 &&
		only?.part === "combined" &&
		only.path === join(ctx.config.crt_dir.replace(/\/+$/, ""), action.ref) &&
		files.removeFirst.length === 0 &&
		files.removeAfter.length === 0
	);
}

/** Refused while a crt-list file still names the file: HAProxy's next reload would fail on it. */
async function deleteStorage(ctx: RuntimeContext, action: ActionOf<"storage-delete">): Promise<ActionResult> {
	const { config } = ctx;
	const namedBy = await crtListFilesNaming(ctx, ctx.runtimeName(action.ref));
	if (namedBy.length > 0) {
		const error = new CertificateeError(
			"ENDPOINT_ERROR",
			`${config.name}: not deleting ${action.ref}: ${namedBy.join(", ")} still name it, and HAProxy's next reload would fail`,
			{
				context: {
					endpoint: config.name,
					target: config.name,
					ref: action.ref,
					file: namedBy[0] as string,
					operation: "storage-delete",
				},
				hint: "remove its line from the crt-list file first; the next cycle retries",
			},
		);
		return { action, ok: false, error };
	}
	return (await removeFile(config.crt_dir, action.ref))
		? { action, ok: true }
		: { action, ok: true, note: "file already gone" };
}

/** The crt-list files on disk whose lines name `name` now (read again: the last observation may be old). */
async function crtListFilesNaming(ctx: RuntimeContext, name: string): Promise<string[]> {
	const naming: string[] = [];
	for (const list of ctx.crtListFiles) {
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

async function removeFromCrtListFile(action: ActionOf<"crt-list-file-remove">): Promise<ActionResult> {
	const listPath = action.crtList;
	const changed = await editCrtListFile(
		listPath,
		(text) => removeCertificateLines(text, action.runtimeName, { listPath }).text,
	);
	return changed ? { action, ok: true } : { action, ok: true, note: `no line of ${listPath} names it` };
}

async function addToCrtListFile(
	ctx: RuntimeContext,
	action: ActionOf<"crt-list-file-add">,
): Promise<ActionResult> {
	const listPath = action.crtList;
	const options = listPath === ctx.config.crt_list ? ctx.config.crt_list_options?.trim() : undefined;
	const line = options ? `${action.runtimeName} ${options}` : action.runtimeName;
	const changed = await editCrtListFile(listPath, (text) =>
		removeCertificateLines(text, action.runtimeName, { listPath }).removed.length > 0
			? text
			: appendLine(text, line),
	);
	return changed ? { action, ok: true } : { action, ok: true, note: `already in ${listPath}` };
}

/** Replaces what HAProxy holds, unless the bundle is unusable or drops names it serves (allow_name_removal). */
async function setRuntime(ctx: RuntimeContext, action: ActionOf<"runtime-set">): Promise<ActionResult> {
	const invalid = checkSendable(ctx, action.bundle, action.ref);
	if (invalid) return { action, ok: false, error: invalid };
	const refused = nameRemovalRefused(ctx, action, await ctx.client.showCert(action.runtimeName));
	if (refused) return { action, ok: false, error: refused };
	await updateCertificate(ctx.client, action.runtimeName, combinedPem(action.bundle));
	return { action, ok: true };
}

/** The write would drop names HAProxy serves for this ref (without allow_name_removal): the refusal. */
function nameRemovalRefused(
	ctx: RuntimeContext,
	action: ActionOf<"runtime-set">,
	current: CertDetail | undefined,
): CertificateeError | undefined {
	if (current === undefined || action.followsStorage) return undefined;
	return checkNameRemoval({
		current: servedNames(current),
		next: [...action.bundle.leaf.dnsNames, ...action.bundle.leaf.ipAddresses],
		allowNameRemoval: ctx.config.allow_name_removal,
		endpoint: ctx.config.name,
		ref: action.ref,
	});
}

/** Makes a new certificate live through its crt-list; without that list in HAProxy it waits for a reload. */
async function addRuntime(ctx: RuntimeContext, action: ActionOf<"runtime-add">): Promise<ActionResult> {
	const invalid = checkSendable(ctx, action.bundle, action.ref);
	if (invalid) return { action, ok: false, error: invalid };
	const list = action.crtList || ctx.config.crt_list || ctx.dirName;
	if (!(await ctx.client.showCrtLists()).includes(list)) {
		return {
			action,
			ok: true,
			note: `pending reload: HAProxy has no crt-list "${list}" to add ${action.runtimeName} to; the file on disk is loaded at the next reload`,
			reloadNeeded: "new-certificate",
		};
	}
	const entry = list === ctx.config.crt_list ? crtListOptions(ctx.config.crt_list_options) : {};
	const write = await addCertificate(ctx.client, action.runtimeName, combinedPem(action.bundle), list, entry);
	return write.addedToCrtList
		? { action, ok: true }
		: { action, ok: true, note: `already in crt-list ${list}` };
}

async function removeFromCrtList(
	ctx: RuntimeContext,
	action: ActionOf<"crt-list-remove">,
): Promise<ActionResult> {
	const entries = await ctx.client.showCrtList(action.crtList);
	if (!entries?.some((e) => e.file === action.runtimeName)) {
		return { action, ok: true, note: `not in crt-list ${action.crtList}` };
	}
	await ctx.client.delCrtListEntry(action.crtList, action.runtimeName);
	return { action, ok: true };
}

async function deleteRuntime(ctx: RuntimeContext, action: ActionOf<"runtime-delete">): Promise<ActionResult> {
	if ((await ctx.client.showCert(action.runtimeName)) === undefined) {
		return { action, ok: true, note: "not in HAProxy's store" };
	}
	await ctx.client.delCert(action.runtimeName);
	return { action, ok: true };
}

/** HAProxy accepts expired certificates: certificatee checks dates (and chain) itself. */
function checkSendable(ctx: RuntimeContext, bundle: Bundle, ref: string): CertificateeError | undefined {
	return checkBundle(bundle, { source: `${ctx.config.name} ${ref}`, now: ctx.now() })[0];
}
