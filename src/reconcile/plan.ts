/**
 * From verdicts to the ordered writes of one endpoint. Pure. Actions exist only for differences, so a
 * converged endpoint plans nothing. Order: every keeper's writes (storage before runtime, so a later reload
 * never brings back old content), then duplicate removals (crt-list, runtime, storage: never a reload).
 */
import type { Verdict } from "./classify.js";
import type { Action, DesiredCertificate, ObservedCrtList, ObservedRef, ServedCertificate } from "./model.js";
import { planServing, type ServingAfter } from "./serving.js";

export interface PlannedStep {
	action: Action;
	why: string;
}

export interface EndpointPlan {
	steps: PlannedStep[];
	/** Things that need an operator, e.g. a new certificate that only a reload can make live. */
	notes: string[];
	/** Which ref serves each name of every keeper written at runtime, once the steps ran. */
	servingAfter: ServingAfter[];
	/** Names the writes hand to another ref (reported before the write, naming it). */
	shadowed: Extract<Verdict, { class: "shadowed" }>[];
}

export interface PlanInput {
	verdicts: readonly Verdict[];
	desired: ReadonlyMap<string, DesiredCertificate>;
	refs: ReadonlyMap<string, ObservedRef>;
	/** HAProxy's runtime name for a ref that runtime does not hold yet (storage dir + ref). */
	runtimeNameFor: (ref: string) => string;
	/** The crt-list (or crt directory) new certificates are added to at runtime; none: they wait for a reload. */
	newCertificateCrtList?: string;
	legacyDuplicates: "remove" | "report";
	/** The crt-lists HAProxy reports (by name): which are files, and whether the target edits them. */
	crtLists?: ReadonlyMap<string, ObservedCrtList>;
	/** Probe results before the writes, to tell who serves a name now. */
	served?: readonly ServedCertificate[];
	/** The driver can re-insert a ref behind a keeper (`runtime-reinsert`). */
	reinserts?: boolean;
}

export function planEndpoint(input: PlanInput): EndpointPlan {
	const keeperSteps: PlannedStep[] = [];
	const removalSteps: PlannedStep[] = [];
	const notes: string[] = [];
	const runtimeName = (ref: string) => input.refs.get(ref)?.runtimeName ?? input.runtimeNameFor(ref);
	const crtListFile = (name: string) => {
		const list = input.crtLists?.get(name);
		return list?.kind === "file" ? list : undefined;
	};

	const write = (
		into: PlannedStep[],
		ref: string,
		certificate: string,
		side: "storage-replace" | "storage-create" | "runtime-set" | "runtime-add",
		why: string,
	) => {
		const desired = input.desired.get(certificate);
		if (desired === undefined) return;
		const bundle = desired.bundle;
		switch (side) {
			case "storage-replace":
			case "storage-create":
				into.push({ action: { op: side, ref, certificate, bundle }, why });
				return;
			case "runtime-set":
				into.push({ action: { op: side, ref, runtimeName: runtimeName(ref), certificate, bundle }, why });
				return;
			case "runtime-add": {
				const crtList = input.newCertificateCrtList;
				if (crtList === undefined) {
					notes.push(
						`${ref}: written to storage; HAProxy will serve it after its next reload (configure crt_list to make new certificates live without one)`,
					);
					return;
				}
				// The file first: a reload at any moment after it loads the certificate from storage.
				const file = crtListFile(crtList);
				if (file?.editable) {
					into.push({
						action: { op: "crt-list-file-add", ref, runtimeName: runtimeName(ref), crtList },
						why,
					});
				} else if (file) {
					// Made live only where a reload keeps serving it: when its directory is itself a crt directory.
					const name = runtimeName(ref);
					const dir = name.slice(0, name.lastIndexOf("/"));
					const loadedFromDir = [...(input.crtLists?.values() ?? [])].some(
						(l) => l.kind === "directory" && l.name.replace(/\/+$/, "") === dir,
					);
					if (!loadedFromDir) {
						notes.push(
							`${ref}: written to storage, not made live: pending a configuration change: add the line "${name}" to the crt-list file ${crtList}, then reload (a runtime-only add would be lost at the next reload)`,
						);
						return;
					}
					notes.push(
						`${ref}: made live through ${crtList} in memory; the file does not name it, so after a reload HAProxy serves it from the crt directory ${dir} (add the line "${name}" to ${crtList} to keep its options)`,
					);
				}
				into.push({
					action: { op: side, ref, runtimeName: runtimeName(ref), crtList, certificate, bundle },
					why,
				});
				return;
			}
		}
	};

	const removeDuplicate = (ref: string, why: string) => {
		const observed = input.refs.get(ref);
		if (observed === undefined) return;
		const name = runtimeName(ref);
		// Files first, then memory, then the certificate file: a reload at any moment finds every file it reads.
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
	};

	for (const v of input.verdicts) {
		switch (v.class) {
			case "in-sync":
			case "refused":
			case "ambiguous":
			case "unmanaged":
			case "shadowed":
			case "unaddressable":
				break;
			case "missing":
				write(keeperSteps, v.ref, v.certificate, "storage-create", "missing");
				write(keeperSteps, v.ref, v.certificate, "runtime-add", "missing");
				break;
			case "stale": {
				const why = "stale";
				if (v.sides.includes("storage")) write(keeperSteps, v.ref, v.certificate, "storage-replace", why);
				if (v.missingSides.includes("storage"))
					write(keeperSteps, v.ref, v.certificate, "storage-create", "missing in storage");
				if (v.sides.includes("runtime")) write(keeperSteps, v.ref, v.certificate, "runtime-set", why);
				if (v.missingSides.includes("runtime"))
					write(keeperSteps, v.ref, v.certificate, "runtime-add", "missing in runtime");
				break;
			}
			case "legacy-duplicate":
				if (v.keeperStable && input.legacyDuplicates === "remove") {
					removeDuplicate(v.ref, `legacy duplicate of ${v.keeper}`);
				} else {
					const why = v.keeperStable
						? "legacy duplicate kept current (legacy_duplicates: report)"
						: `legacy duplicate kept current until ${v.keeper} is stable${v.keeperUnstable ? `: ${v.keeperUnstable}` : ""}`;
					if (v.staleSides.includes("storage"))
						write(keeperSteps, v.ref, v.certificate, "storage-replace", why);
					if (v.staleSides.includes("runtime")) write(keeperSteps, v.ref, v.certificate, "runtime-set", why);
				}
				break;
			case "deleted-pending-reload":
				// Never write its storage file again: a duplicate is never recreated.
				if (v.keeperStable && input.legacyDuplicates === "remove") {
					removeDuplicate(v.ref, `legacy duplicate of ${v.keeper}, already gone from storage`);
				} else if (v.runtimeStale) {
					write(
						keeperSteps,
						v.ref,
						v.certificate,
						"runtime-set",
						`deleted duplicate kept current in runtime until ${v.keeper} is stable${v.keeperUnstable ? `: ${v.keeperUnstable}` : ""}`,
					);
				}
				break;
			case "pinned":
				if (v.staleSides.includes("storage"))
					write(keeperSteps, v.ref, v.certificate, "storage-replace", "pinned duplicate kept current");
				if (v.staleSides.includes("runtime"))
					write(keeperSteps, v.ref, v.certificate, "runtime-set", "pinned duplicate kept current");
				break;
			default: {
				const never: never = v;
				throw new Error(`unhandled verdict ${JSON.stringify(never)}`);
			}
		}
	}
	const serving = planServing({
		steps: [...keeperSteps, ...removalSteps],
		refs: input.refs,
		desired: input.desired,
		...(input.served ? { served: input.served } : {}),
		reinserts: input.reinserts === true,
	});
	return { steps: serving.steps, notes, servingAfter: serving.servingAfter, shadowed: serving.shadowed };
}
