/**
 * The verdict on a ref that is no desired certificate's keeper, as an ordered chain of small rules: the first
 * that applies decides. Before a keeper is known: unaddressable, ambiguous, overlapping, unmanaged; once the ref
 * is a duplicate of one keeper: pinned outside the target, pinned by the configuration, deleted pending a reload,
 * else a legacy duplicate. Pure.
 */
import { sameNameSet } from "../../../certificates/names.js";
import type { PendingCrtListChange, Verdict } from "../../../reconcile/verdict.js";
import type { ClassifyContext, ClassifyInput } from "./classification.js";
import type { ObservedCrtList, ObservedRef } from "./model.js";
import { comparableNames, namesOf, sameKeyType, sideHolds, staleSidesOf } from "./ref-content.js";

type Keeper = ClassifyInput["desired"][number];

/** A ref that is no keeper, beside the desired certificates whose names it carries. */
interface OtherRef {
	observed: ObservedRef;
	names: string[];
	/** Keepers of the same key type with exactly its names. */
	equal: Keeper[];
	/** Keepers of the same key type sharing some of its names, not all. */
	overlapping: Keeper[];
}

/** A ref carrying exactly one keeper's names: a duplicate of it. */
interface Duplicate {
	observed: ObservedRef;
	keeper: Keeper;
	base: { ref: string; certificate: string; keeper: string };
}

type Rule<T> = (subject: T, ctx: ClassifyContext) => Verdict | undefined;

export function classifyOther(observed: ObservedRef, ctx: ClassifyContext): Verdict {
	const other = otherRef(observed, ctx.desired);
	const early = firstVerdict(BEFORE_A_KEEPER, other, ctx);
	if (early !== undefined) return early;
	const keeper = other.equal[0];
	if (keeper === undefined) return unmanaged(other);
	const duplicate = {
		observed,
		keeper,
		base: { ref: observed.ref, certificate: keeper.certificate.name, keeper: keeper.ref },
	};
	return firstVerdict(AS_A_DUPLICATE, duplicate, ctx) ?? legacyDuplicate(duplicate, ctx);
}

function firstVerdict<T>(rules: readonly Rule<T>[], subject: T, ctx: ClassifyContext): Verdict | undefined {
	for (const rule of rules) {
		const verdict = rule(subject, ctx);
		if (verdict !== undefined) return verdict;
	}
	return undefined;
}

function otherRef(observed: ObservedRef, desired: readonly Keeper[]): OtherRef {
	const { names, dnsOnly } = namesOf(observed);
	// A ref of another key type is not a duplicate: HAProxy serves it to clients of that key type.
	const sameKey = desired.filter((d) => sameKeyType(observed, d.certificate));
	const equal = sameKey.filter((d) => sameNameSet(comparableNames(d.certificate, dnsOnly), names));
	const overlapping = sameKey.filter(
		(d) =>
			!equal.includes(d) &&
			comparableNames(d.certificate, dnsOnly).some((n) => names.includes(n.toLowerCase())),
	);
	return { observed, names, equal, overlapping };
}

/**
 * A storage file the target cannot address by its name is never read, written or deleted. Its crt-list entry
 * and runtime certificate could be, by HAProxy's exact path, but a change there lives in memory only: the
 * next reload loads the file again as it is on disk, so it is left alone too.
 */
const unaddressable: Rule<OtherRef> = ({ observed, equal }) => {
	if (!observed.unaddressable) return undefined;
	const { addressedAs } = observed.unaddressable;
	const certificate = equal[0]?.certificate.name;
	return {
		class: "unaddressable",
		ref: observed.ref,
		addressedAs,
		...(certificate === undefined ? {} : { certificate }),
		why: `the Data Plane API addresses ${observed.ref} as ${addressedAs} (it sanitises names): a request for it would read, replace or delete ${addressedAs} instead; left alone. Rename the file on disk to a name the API keeps unchanged (letters, digits, _ and - before the extension) and reload HAProxy`,
	};
};

const severalKeepers: Rule<OtherRef> = ({ observed, equal, overlapping }) =>
	equal.length > 1 || (equal.length === 1 && overlapping.length > 0)
		? {
				class: "ambiguous",
				ref: observed.ref,
				certificates: [...equal, ...overlapping].map((d) => d.certificate.name),
				why: "several desired certificates could be its keeper",
			}
		: undefined;

const overlappingOnly: Rule<OtherRef> = ({ observed, names, equal, overlapping }) =>
	equal.length === 0 && overlapping.length > 0
		? {
				class: "ambiguous",
				ref: observed.ref,
				certificates: overlapping.map((d) => d.certificate.name),
				why: `its names (${names.join(", ")}) overlap a desired certificate's without being equal`,
			}
		: undefined;

const BEFORE_A_KEEPER: readonly Rule<OtherRef>[] = [unaddressable, severalKeepers, overlappingOnly];

function unmanaged({ observed, names }: OtherRef): Verdict {
	const notAfter = observed.runtime?.notAfter ?? observed.storage?.notAfter;
	return { class: "unmanaged", ref: observed.ref, names, ...(notAfter ? { notAfter } : {}) };
}

/** Its file is not the target's to write, and a change in memory only would not survive a reload. */
const outsideTheTarget: Rule<Duplicate> = ({ observed, base }) =>
	observed.external !== undefined
		? { class: "pinned", ...base, staleSides: [], why: observed.external }
		: undefined;

/** A duplicate the configuration keeps (a crt line, a crt-list file the target cannot edit, an earlier refusal). */
const pinnedByConfiguration: Rule<Duplicate> = ({ observed, keeper, base }, { input }) => {
	if (input.policy.legacyDuplicates !== "remove") return undefined;
	const byFile = crtListFilePin(observed, input.crtLists);
	const pinned = pinnedReason(observed) ?? byFile?.why ?? input.knownPinned?.get(observed.ref);
	if (pinned === undefined) return undefined;
	return {
		class: "pinned",
		...base,
		staleSides: staleSidesOf(observed, keeper.certificate.bundle),
		why: pinned,
		...(byFile && pinned === byFile.why ? { pendingChange: byFile.pendingChange } : {}),
	};
};

const deletedPendingReload: Rule<Duplicate> = (duplicate, ctx) =>
	duplicate.observed.storage
		? undefined
		: {
				class: "deleted-pending-reload",
				...duplicate.base,
				...stability(duplicate, ctx),
				runtimeStale: !sideHolds(duplicate.observed.runtime, duplicate.keeper.certificate.bundle),
			};

const AS_A_DUPLICATE: readonly Rule<Duplicate>[] = [
	outsideTheTarget,
	pinnedByConfiguration,
	deletedPendingReload,
];

function legacyDuplicate(duplicate: Duplicate, ctx: ClassifyContext): Verdict {
	return {
		class: "legacy-duplicate",
		...duplicate.base,
		...stability(duplicate, ctx),
		staleSides: staleSidesOf(duplicate.observed, duplicate.keeper.certificate.bundle),
	};
}

function stability({ observed, keeper }: Duplicate, { keepers, byRef }: ClassifyContext) {
	const unstable = keeperUnstable(keeper.ref, keepers.get(keeper.ref), byRef.get(keeper.ref), observed);
	return { keeperStable: unstable === undefined, ...(unstable ? { keeperUnstable: unstable } : {}) };
}

/**
 * Why a keeper does not really serve yet, or undefined when it is stable: in sync on both sides, runtime
 * status Used, and in every crt-list (or crt directory) the duplicate is in. Otherwise removing the duplicate
 * hands its names to the default certificate.
 */
export function keeperUnstable(
	keeper: string,
	verdict: Verdict | undefined,
	observed: ObservedRef | undefined,
	duplicate: ObservedRef,
): string | undefined {
	if (verdict?.class !== "in-sync") return `${keeper} is not in sync yet (${verdict?.class ?? "unknown"})`;
	const status = observed?.runtime?.status;
	if (status !== undefined && status !== "Used")
		return `${keeper} is ${status} in HAProxy: no bind serves it, so the duplicate still does`;
	const missing = duplicate.crtLists.filter((l) => !(observed?.crtLists ?? []).includes(l));
	if (missing.length > 0)
		return `${keeper} is not in ${missing.join(", ")}, where the duplicate serves its names`;
	return undefined;
}

/** A ref held by runtime with no crt-list entry and status Used is referenced by a `crt` line: it cannot leave. */
function pinnedReason(ref: ObservedRef): string | undefined {
	if (ref.runtime && ref.crtLists.length === 0 && ref.runtime.status === "Used") {
		return "referenced directly by a crt line in the HAProxy configuration; it can only go with a config change and reload";
	}
	return undefined;
}

/**
 * A duplicate named by a crt-list file that the target cannot edit (the Data Plane API edits crt-list files
 * only with a reload): a reload re-reads that file, so its storage file must stay, and stay current.
 */
function crtListFilePin(
	ref: ObservedRef,
	lists: readonly ObservedCrtList[] | undefined,
): { why: string; pendingChange: PendingCrtListChange } | undefined {
	const name = ref.runtimeName;
	const list = lists?.find(
		(l) =>
			l.kind === "file" &&
			!l.editable &&
			((name !== undefined && (l.lines?.[name]?.length ?? 0) > 0) || ref.crtLists.includes(l.name)),
	);
	if (list === undefined) return undefined;
	const removeLines = (name !== undefined ? list.lines?.[name] : undefined) ?? [name ?? ref.ref];
	const gone = ref.storage
		? ""
		: "; its file is already gone from storage, so HAProxy's next reload fails until the line is removed";
	return {
		why: `named by the crt-list file ${list.name} (${removeLines.map((l) => `"${l}"`).join(", ")}), which a reload re-reads: pending a configuration change (remove that line, then reload); kept current, never deleted until then${gone}`,
		pendingChange: { file: list.name, removeLines },
	};
}
