/**
 * From verdicts to the ordered writes of one endpoint. Pure. Actions exist only for differences, so a
 * converged endpoint plans nothing. Order: every keeper's writes (storage before runtime, so a later reload
 * never brings back old content), then duplicate removals (crt-list, runtime, storage: never a reload).
 */
import type { Bundle } from "../../../certificates/types.js";
import type { DesiredCertificate, ServedCertificate } from "../../../reconcile/model.js";
import type { Verdict } from "./classify.js";
import type { HaproxyStep, ObservedCrtList, ObservedRef } from "./model.js";
import { placedWrite } from "./placement.js";
import type { ReloadNeed } from "./reload-budget.js";
import { planServing, type ServingAfter } from "./serving.js";

export interface EndpointPlan {
	steps: HaproxyStep[];
	/** Things that need an operator, e.g. a new certificate that only a reload can make live. */
	notes: string[];
	/** Which ref serves each name of every keeper written at runtime, once the steps ran. */
	servingAfter: ServingAfter[];
	/** Names the writes hand to another ref (reported before the write, naming it). */
	shadowed: Extract<Verdict, { class: "shadowed" }>[];
	/** Refs whose storage write only a reload makes live (see reload-budget.ts). */
	reloadNeeds: ReloadNeed[];
}

export interface PlanInput {
	verdicts: readonly Verdict[];
	desired: ReadonlyMap<string, DesiredCertificate>;
	refs: ReadonlyMap<string, ObservedRef>;
	/** HAProxy's runtime name for a ref that runtime does not hold yet (storage dir + ref). */
	runtimeNameFor: (ref: string) => string;
	/** The crt-list (or crt directory) new certificates are added to at runtime; none: they wait for a reload. */
	newCertificateCrtList?: string;
	/**
	 * newCertificateCrtList is the storage directory by default (no crt-list configured): when HAProxy does not
	 * load that directory, a new certificate is reported NEW_CERTIFICATE_NEEDS_CONFIG with the line to add.
	 */
	newCertificateDirDefault?: boolean;
	legacyDuplicates: "remove" | "report";
	/** The crt-lists HAProxy reports (by name): which are files, and whether the target edits them. */
	crtLists?: ReadonlyMap<string, ObservedCrtList>;
	/** Probe results before the writes, to tell who serves a name now. */
	served?: readonly ServedCertificate[];
	/** The driver can re-insert a ref behind a keeper (`runtime-reinsert`). */
	reinserts?: boolean;
}

export function planEndpoint(input: PlanInput): EndpointPlan {
	const plan: Planning = { input, keeperSteps: [], removalSteps: [], notes: [], reloadNeeds: [] };
	for (const v of input.verdicts) planVerdict(plan, v);
	const serving = planServing({
		steps: [...plan.keeperSteps, ...plan.removalSteps],
		refs: input.refs,
		desired: input.desired,
		...(input.served ? { served: input.served } : {}),
		reinserts: input.reinserts === true,
	});
	return {
		steps: serving.steps,
		notes: plan.notes,
		servingAfter: serving.servingAfter,
		shadowed: serving.shadowed,
		reloadNeeds: plan.reloadNeeds,
	};
}

/** The plan being built: keepers' writes first, duplicate removals after. */
interface Planning {
	input: PlanInput;
	keeperSteps: HaproxyStep[];
	removalSteps: HaproxyStep[];
	notes: string[];
	reloadNeeds: ReloadNeed[];
}

type WriteSide = "storage-replace" | "storage-create" | "runtime-set" | "runtime-add";

function planVerdict(plan: Planning, v: Verdict): void {
	switch (v.class) {
		case "in-sync":
		case "refused":
		case "ambiguous":
		case "unmanaged":
		case "shadowed":
		case "unaddressable":
			return;
		case "missing":
			write(plan, v.ref, v.certificate, "storage-create", "missing");
			write(plan, v.ref, v.certificate, "runtime-add", "missing");
			return;
		case "stale":
			planStale(plan, v);
			return;
		case "legacy-duplicate":
			planLegacyDuplicate(plan, v);
			return;
		case "deleted-pending-reload":
			planDeletedDuplicate(plan, v);
			return;
		case "pinned":
			if (v.staleSides.includes("storage"))
				write(plan, v.ref, v.certificate, "storage-replace", "pinned duplicate kept current");
			if (v.staleSides.includes("runtime"))
				write(plan, v.ref, v.certificate, "runtime-set", "pinned duplicate kept current");
			return;
		default: {
			const never: never = v;
			throw new Error(`unhandled verdict ${JSON.stringify(never)}`);
		}
	}
}

/** Stale sides are replaced; a side that lacks the keeper gets it. */
function planStale(plan: Planning, v: Extract<Verdict, { class: "stale" }>): void {
	const why = "stale";
	if (v.sides.includes("storage")) write(plan, v.ref, v.certificate, "storage-replace", why);
	if (v.missingSides.includes("storage"))
		write(plan, v.ref, v.certificate, "storage-create", "missing in storage");
	if (v.sides.includes("runtime")) {
		const storageHoldsIt = !v.sides.includes("storage") && !v.missingSides.includes("storage");
		if (storageHoldsIt)
			write(plan, v.ref, v.certificate, "runtime-set", "stale in runtime; its file holds it already", true);
		else write(plan, v.ref, v.certificate, "runtime-set", why);
	}
	if (v.missingSides.includes("runtime"))
		write(plan, v.ref, v.certificate, "runtime-add", "missing in runtime");
}

/** Removed once its keeper is stable (legacy_duplicates: remove); until then kept current. */
function planLegacyDuplicate(plan: Planning, v: Extract<Verdict, { class: "legacy-duplicate" }>): void {
	if (v.keeperStable && plan.input.legacyDuplicates === "remove") {
		removeDuplicate(plan, v.ref, `legacy duplicate of ${v.keeper}`);
		return;
	}
	const why = v.keeperStable
		? "legacy duplicate kept current (legacy_duplicates: report)"
		: `legacy duplicate kept current until ${v.keeper} is stable${v.keeperUnstable ? `: ${v.keeperUnstable}` : ""}`;
	if (v.staleSides.includes("storage")) write(plan, v.ref, v.certificate, "storage-replace", why);
	if (v.staleSides.includes("runtime")) write(plan, v.ref, v.certificate, "runtime-set", why);
}

/** A duplicate already gone from storage: its storage file is never written again (never recreated). */
function planDeletedDuplicate(
	plan: Planning,
	v: Extract<Verdict, { class: "deleted-pending-reload" }>,
): void {
	if (v.keeperStable && plan.input.legacyDuplicates === "remove") {
		removeDuplicate(plan, v.ref, `legacy duplicate of ${v.keeper}, already gone from storage`);
	} else if (v.runtimeStale) {
		write(
			plan,
			v.ref,
			v.certificate,
			"runtime-set",
			`deleted duplicate kept current in runtime until ${v.keeper} is stable${v.keeperUnstable ? `: ${v.keeperUnstable}` : ""}`,
		);
	}
}

function runtimeNameOf(input: PlanInput, ref: string): string {
	return input.refs.get(ref)?.runtimeName ?? input.runtimeNameFor(ref);
}

/** One write of a desired certificate to one side of `ref`; nothing when the certificate is not desired. */
function write(
	plan: Planning,
	ref: string,
	certificate: string,
	side: WriteSide,
	why: string,
	followsStorage = false,
): void {
	const desired = plan.input.desired.get(certificate);
	if (desired === undefined) return;
	const bundle = desired.bundle;
	const placement = plan.input.refs.get(ref)?.placement;
	const files = placement === undefined ? undefined : placedWrite(placement);
	if (files !== undefined && "refused" in files) {
		const note = `${ref}: not written: ${files.refused}`;
		if (!plan.notes.includes(note)) plan.notes.push(note);
		return;
	}
	switch (side) {
		case "storage-replace":
			plan.keeperSteps.push({
				action: { op: side, ref, certificate, bundle, ...(files ? { files } : {}) },
				why,
			});
			return;
		case "storage-create":
			plan.keeperSteps.push({ action: { op: side, ref, certificate, bundle }, why });
			return;
		case "runtime-set": {
			const runtimeName = runtimeNameOf(plan.input, ref);
			const follows = followsStorage ? { followsStorage: true as const } : {};
			plan.keeperSteps.push({ action: { op: side, ref, runtimeName, certificate, bundle, ...follows }, why });
			return;
		}
		case "runtime-add":
			planRuntimeAdd(plan, ref, certificate, bundle, why);
			return;
	}
}

/**
 * A new certificate made live through the configured crt-list: its file gets the line first (a reload at any
 * moment after it loads the certificate from storage); a list file certificatee cannot edit keeps it pending.
 */
function planRuntimeAdd(plan: Planning, ref: string, certificate: string, bundle: Bundle, why: string): void {
	const { input, notes } = plan;
	const crtList = input.newCertificateCrtList;
	if (crtList === undefined) {
		const note = `${ref}: written to storage; HAProxy will serve it after its next reload (configure crt_list to make new certificates live without one)`;
		notes.push(note);
		plan.reloadNeeds.push({ ref, certificate, reason: "new-certificate", note });
		return;
	}
	const runtimeName = runtimeNameOf(input, ref);
	const list = input.crtLists?.get(crtList);
	if (input.newCertificateDirDefault && input.crtLists !== undefined && list === undefined) {
		notes.push(needsConfigNote(input, ref, runtimeName));
		return;
	}
	const file = list?.kind === "file" ? list : undefined;
	if (file?.editable) {
		plan.keeperSteps.push({ action: { op: "crt-list-file-add", ref, runtimeName, crtList }, why });
	} else if (file && !notedUneditableList(plan, ref, runtimeName, crtList)) {
		return;
	}
	plan.keeperSteps.push({
		action: { op: "runtime-add", ref, runtimeName, crtList, certificate, bundle },
		why,
	});
}

/**
 * No crt directory and no crt-list of HAProxy's makes a new file live (a crt-store or ssl-f-use layout): the
 * file is written (complete, so the configuration can name it), and the exact line to add is reported; a
 * reload alone would not load it, so none is asked for.
 */
function needsConfigNote(input: PlanInput, ref: string, file: string): string {
	const refs = [...input.refs.values()];
	const store = refs
		.find((r) => r.placement?.via === "crt-store")
		?.runtimeName?.split("/")[0]
		?.slice(1);
	const alias = ref.replace(/\.pem$/, "");
	const line =
		store !== undefined
			? `load crt "${file}" alias "${alias}" in crt-store ${store}, and crt "@${store}/${alias}" on the bind line`
			: refs.some((r) => r.placement?.via === "ssl-f-use")
				? `ssl-f-use crt ${file} in the frontend`
				: `crt ${file} on the bind line (or crt ${file.slice(0, file.lastIndexOf("/"))} to load the directory)`;
	return `${ref}: NEW_CERTIFICATE_NEEDS_CONFIG: written to ${file}, but HAProxy loads no crt directory or crt-list that makes it live: add ${line}, then reload (or configure crt_list)`;
}

/**
 * A crt-list file certificatee does not edit: the certificate is made live only where a reload keeps serving
 * it, when its directory is itself a crt directory. Notes either way; returns whether to add it at runtime.
 */
function notedUneditableList(plan: Planning, ref: string, name: string, crtList: string): boolean {
	const dir = name.slice(0, name.lastIndexOf("/"));
	const loadedFromDir = [...(plan.input.crtLists?.values() ?? [])].some(
		(l) => l.kind === "directory" && l.name.replace(/\/+$/, "") === dir,
	);
	if (!loadedFromDir) {
		plan.notes.push(
			`${ref}: written to storage, not made live: pending a configuration change: add the line "${name}" to the crt-list file ${crtList}, then reload (a runtime-only add would be lost at the next reload)`,
		);
		return false;
	}
	plan.notes.push(
		`${ref}: made live through ${crtList} in memory; the file does not name it, so after a reload HAProxy serves it from the crt directory ${dir} (add the line "${name}" to ${crtList} to keep its options)`,
	);
	return true;
}

/** Files first, then memory, then the certificate file: a reload at any moment finds every file it reads. */
function removeDuplicate(plan: Planning, ref: string, why: string): void {
	const { input, removalSteps } = plan;
	const observed = input.refs.get(ref);
	if (observed === undefined) return;
	const name = runtimeNameOf(input, ref);
	const files = [...(input.crtLists?.values() ?? [])].filter(
		(l) =>
			l.kind === "file" &&
			l.editable &&
			(observed.crtLists.includes(l.name) || (l.lines?.[name]?.length ?? 0) > 0),
	);
	for (const file of files) {
		removalSteps.push({
			action: { op: "crt-list-file-remove", ref, runtimeName: name, crtList: file.name },
			why,
		});
	}
	if (observed.runtime) {
		for (const crtList of observed.crtLists) {
			removalSteps.push({ action: { op: "crt-list-remove", ref, runtimeName: name, crtList }, why });
		}
		removalSteps.push({ action: { op: "runtime-delete", ref, runtimeName: name }, why });
	}
	if (observed.storage) removalSteps.push({ action: { op: "storage-delete", ref }, why });
}
