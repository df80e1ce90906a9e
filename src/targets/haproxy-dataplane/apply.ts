/**
 * Phase 3 for one Data Plane API endpoint: one HaproxyAction, one or two requests, and an ActionResult that says
 * what really happened. Endpoint failures are values (ok: false); a 202 is a reload caused, never hidden.
 */
import { basename } from "node:path";
import { bundleNames, combinedPem } from "../../certificates/bundle.js";
import { checkBundle } from "../../certificates/check.js";
import type { Bundle } from "../../certificates/types.js";
import { CertificateeError, isCertificateeError } from "../../errors.js";
import type { ActionResult } from "../../reconcile/model.js";
import {
	DEFAULT_BUFSIZE,
	dataplaneSetCertSize,
	PENDING_RELOAD_NOTE,
	payloadTooLarge,
} from "../haproxy/bufsize.js";
import type { HaproxyAction, PlacedWrite } from "../haproxy/engine/model.js";
import { checkNameRemoval } from "../haproxy/guard.js";
import type { DataplaneClient, ReloadCaused } from "./client.js";
import { runtimeMeta } from "./observe.js";

export interface ApplyContext {
	endpoint: string;
	client: DataplaneClient;
	now: () => Date;
	/** The target's allow_name_removal. */
	allowNameRemoval: boolean;
	/** HAProxy's tune.bufsize (default 16384): no runtime write whose socket request would reach it is sent. */
	bufsize?: number;
	/** Told about every reload a server caused (the reason says which write). */
	warn?: (fields: Record<string, unknown>, message: string) => void;
}

type Outcome = Omit<ActionResult, "action" | "ok">;

function reloaded(ctx: ApplyContext, action: HaproxyAction, reload: ReloadCaused | undefined): Outcome {
	if (reload === undefined) return {};
	const reason = `the server answered 202 to ${action.op} of ${action.ref} although skip_reload=true was sent`;
	ctx.warn?.(
		{ endpoint: ctx.endpoint, ref: action.ref, reloadId: reload.reloadId },
		`reload caused: ${reason}`,
	);
	return {
		reloadCaused: { ...(reload.reloadId === undefined ? {} : { reloadId: reload.reloadId }), reason },
	};
}

/** A runtime read the API refuses for a separate key file (3.2+): undefined, nothing to compare. */
async function readableRuntime(ctx: ApplyContext, name: string, signal: AbortSignal) {
	try {
		return await ctx.client.runtime.get(name, signal);
	} catch (e) {
		if (isCertificateeError(e, "RUNTIME_SEPARATE_KEY")) return undefined;
		throw e;
	}
}

const UNREADABLE_NOTE =
	"HAProxy's memory cannot be read back through the Data Plane API (its key is a separate file): the probe checks what is served";

/** Reads the runtime certificate back: HAProxy must now hold the bundle's leaf. False when it cannot be read. */
async function verifyRuntime(
	ctx: ApplyContext,
	name: string,
	bundle: Bundle,
	signal: AbortSignal,
): Promise<boolean> {
	const held = await readableRuntime(ctx, name, signal);
	if (held === undefined) return false;
	const serial = (held.serial ?? "").toUpperCase();
	const sha1 = (held.sha1_finger_print ?? "").toUpperCase();
	if (sha1 === bundle.leaf.sha1 || (sha1 === "" && serial === bundle.leaf.serial)) return true;
	throw new CertificateeError(
		"ENDPOINT_ERROR",
		`endpoint ${ctx.endpoint}: after the write HAProxy holds serial ${serial || "?"} for ${name}, not ${bundle.leaf.serial}`,
		{
			context: { endpoint: ctx.endpoint, certificate: name, operation: "verify runtime write" },
			retryable: true,
			hint: "another writer or a reload interfered; the next cycle observes and retries",
		},
	);
}

/**
 * The API forwards a runtime write to HAProxy as one `set ssl cert` request; one of tune.bufsize bytes or more
 * hangs or kills HAProxy 2.6-3.2. Such a write is never sent (RUNTIME_PAYLOAD_TOO_LARGE, with its size).
 */
function refuseOversize(
	ctx: ApplyContext,
	action: HaproxyAction & { runtimeName: string; bundle: Bundle },
): void {
	const name = action.op === "runtime-add" ? basename(action.runtimeName) : action.runtimeName;
	const tooLarge = payloadTooLarge({
		size: dataplaneSetCertSize(name, combinedPem(action.bundle)),
		bufsize: ctx.bufsize ?? DEFAULT_BUFSIZE,
		endpoint: ctx.endpoint,
		operation: action.op,
		certificate: name,
	});
	if (tooLarge) throw tooLarge;
}

async function runtimeAdd(
	ctx: ApplyContext,
	action: Extract<HaproxyAction, { op: "runtime-add" }>,
	signal: AbortSignal,
): Promise<Outcome> {
	// The API names a runtime-created certificate by the upload's basename (dataplaneapi #379).
	const name = basename(action.runtimeName);
	const pem = combinedPem(action.bundle);
	const existing = await ctx.client.runtime.get(name, signal).catch((e: unknown) => {
		if (isCertificateeError(e, "ENDPOINT_NOT_FOUND")) return undefined;
		throw e;
	});
	if (existing === undefined) await ctx.client.runtime.create(name, pem, signal);
	else await ctx.client.runtime.replace(name, pem, signal);
	await ctx.client.crtLists.add(action.crtList, { file: name }, signal);
	if (!(await verifyRuntime(ctx, name, action.bundle, signal))) return { note: UNREADABLE_NOTE };
	return name === action.runtimeName
		? {}
		: { note: `HAProxy knows it as ${name}: the Data Plane API keeps only the basename of runtime names` };
}

/**
 * A ref's own files (a crt-store load: its certificate file, and its key file first when the load names one),
 * each replaced in storage in the planned order. The API's storage takes only a certificate with its key
 * (validatePEM), so each file gets the whole combined PEM: HAProxy takes the certificates from the crt file and
 * the key from the key file (a `key` argument overrides a key inside the crt file), both of the new pair. With
 * skip_reload no reload falls between the two writes; one that does (another writer's), or a stop between them,
 * leaves the key file holding the new leaf beside the old crt file: the next observation sees the mismatch and
 * writes the pair again. Companions to remove are never planned here (the API cannot remove them).
 */
async function writePlaced(
	ctx: ApplyContext,
	action: Extract<HaproxyAction, { op: "storage-replace" }>,
	placed: PlacedWrite,
	signal: AbortSignal,
): Promise<Outcome> {
	if (placed.removeFirst.length > 0 || placed.removeAfter.length > 0) {
		throw new CertificateeError(
			"NOT_AVAILABLE",
			`endpoint ${ctx.endpoint}: ${action.ref}: the Data Plane API cannot remove ${[...placed.removeFirst, ...placed.removeAfter].join(", ")}`,
			{
				context: { endpoint: ctx.endpoint, ref: action.ref, operation: action.op },
				hint: "remove the stale companion files by hand and reload HAProxy",
			},
		);
	}
	const pem = combinedPem(action.bundle);
	let reload: ReloadCaused | undefined;
	const names: string[] = [];
	for (const file of placed.files) {
		const name = basename(file.path);
		if (names.includes(name)) continue;
		names.push(name);
		reload = (await ctx.client.storage.replace(name, pem, signal)).reload ?? reload;
	}
	return {
		...reloaded(ctx, action, reload),
		...(names.length > 1
			? { note: `pair written as ${names.join(" then ")} (each holds the whole PEM)` }
			: {}),
	};
}

/**
 * HAProxy (and the storage check) accept expired or broken certificates, and a bad storage file breaks every
 * later reload: every bundle is checked before it is sent.
 */
function refuseUnsendable(ctx: ApplyContext, action: HaproxyAction): void {
	if (!("bundle" in action)) return;
	const problem = checkBundle(action.bundle, { source: `${ctx.endpoint} ${action.ref}`, now: ctx.now() })[0];
	if (problem) throw problem;
}

/** HAProxy recomputes SNI names from the new certificate: refuse one that stops covering a served name. */
async function refuseDroppedNames(
	ctx: ApplyContext,
	action: Extract<HaproxyAction, { op: "runtime-set" }>,
	signal: AbortSignal,
): Promise<void> {
	if (action.followsStorage) return;
	// A pair HAProxy's memory cannot be read of: its files hold what it serves (the plan compared those).
	const held = await readableRuntime(ctx, action.runtimeName, signal);
	if (held === undefined) return;
	const current = runtimeMeta(held).names ?? [];
	const refused = checkNameRemoval({
		current,
		next: bundleNames(action.bundle),
		allowNameRemoval: ctx.allowNameRemoval,
		endpoint: ctx.endpoint,
		ref: action.ref,
	});
	if (refused) throw refused;
}

/** Actions never planned for this driver: refused, never guessed. */
function refuseUnplanned(
	ctx: ApplyContext,
	action: Extract<HaproxyAction, { op: "crt-list-file-add" | "crt-list-file-remove" | "runtime-reinsert" }>,
): never {
	if (action.op === "runtime-reinsert") {
		// It cannot read the content HAProxy holds.
		throw new CertificateeError(
			"ENDPOINT_ERROR",
			`${ctx.endpoint}: cannot re-insert ${action.runtimeName} through the Data Plane API`,
			{ context: { endpoint: ctx.endpoint, ref: action.ref, operation: action.op } },
		);
	}
	// Planned only for editable files; the API's storage crt-list endpoints always reload.
	throw new CertificateeError(
		"NOT_AVAILABLE",
		`endpoint ${ctx.endpoint}: cannot edit the crt-list file ${action.crtList} without a reload`,
		{
			context: { endpoint: ctx.endpoint, ref: action.ref, file: action.crtList, operation: action.op },
			hint: "edit the crt-list file by hand (a configuration change)",
		},
	);
}

/** A removal whose object is already gone (404) is done. */
async function removal(remove: () => Promise<Outcome>, gone: string): Promise<Outcome> {
	try {
		return await remove();
	} catch (e) {
		if (isCertificateeError(e, "ENDPOINT_NOT_FOUND")) return { note: gone };
		throw e;
	}
}

async function storageWrite(
	ctx: ApplyContext,
	action: Extract<HaproxyAction, { op: "storage-replace" | "storage-create" }>,
	signal: AbortSignal,
): Promise<Outcome> {
	const pem = combinedPem(action.bundle);
	if (action.op === "storage-replace") {
		if (action.files !== undefined) return writePlaced(ctx, action, action.files, signal);
		return reloaded(ctx, action, (await ctx.client.storage.replace(action.ref, pem, signal)).reload);
	}
	const written = await ctx.client.storage.create(action.ref, pem, signal);
	const stored = written.certificate.storage_name;
	return {
		...reloaded(ctx, action, written.reload),
		...(stored !== action.ref ? { note: `the server stored it as ${stored}` } : {}),
	};
}

async function perform(ctx: ApplyContext, action: HaproxyAction, signal: AbortSignal): Promise<Outcome> {
	const { client } = ctx;
	refuseUnsendable(ctx, action);
	switch (action.op) {
		case "storage-replace":
		case "storage-create":
			return storageWrite(ctx, action, signal);
		case "runtime-set":
			refuseOversize(ctx, action);
			await refuseDroppedNames(ctx, action, signal);
			await client.runtime.replace(action.runtimeName, combinedPem(action.bundle), signal);
			return (await verifyRuntime(ctx, action.runtimeName, action.bundle, signal))
				? {}
				: { note: UNREADABLE_NOTE };
		case "runtime-add":
			refuseOversize(ctx, action);
			return runtimeAdd(ctx, action, signal);
		case "crt-list-remove":
			return removal(async () => {
				await client.crtLists.delete(action.crtList, action.runtimeName, undefined, signal);
				return {};
			}, "crt-list entry already gone");
		case "runtime-delete":
			await client.runtime.delete(action.runtimeName, signal);
			return {};
		case "storage-delete":
			return removal(
				async () => reloaded(ctx, action, (await client.storage.delete(action.ref, signal)).reload),
				"storage delete answered 404: already gone",
			);
		case "crt-list-file-add":
		case "crt-list-file-remove":
		case "runtime-reinsert":
			return refuseUnplanned(ctx, action);
		default: {
			const never: never = action;
			throw new Error(`unknown action ${JSON.stringify(never)}`);
		}
	}
}

/** Performs one action; endpoint errors become `ok: false`, cancellation and programming errors throw. */
export async function applyAction(
	ctx: ApplyContext,
	action: HaproxyAction,
	signal: AbortSignal,
): Promise<ActionResult> {
	try {
		return { action, ok: true, ...(await perform(ctx, action, signal)) };
	} catch (e) {
		if (isCertificateeError(e, "RUNTIME_PAYLOAD_TOO_LARGE")) {
			return { action, ok: false, error: e, note: PENDING_RELOAD_NOTE, reloadNeeded: "too-large" };
		}
		if (e instanceof CertificateeError && !signal.aborted) return { action, ok: false, error: e };
		throw e;
	}
}
