/**
 * Phase 2: classify every desired certificate and every observed ref of one endpoint, from the complete
 * observation. Pure: plain data in, verdicts out; no I/O, clock or logger.
 */
import { isIP } from "node:net";
import { bundleNames } from "../../../certificates/bundle.js";
import { chainMatches } from "../../../certificates/chain.js";
import { droppedNames, nameSet, sameNameSet } from "../../../certificates/names.js";
import type { Bundle, CertificateInfo } from "../../../certificates/types.js";
import { downgradeRefusal } from "../../../reconcile/downgrade.js";
import type {
	DesiredCertificate,
	ObservedCrtList,
	ObservedRef,
	RefMeta,
	ServedCertificate,
} from "../../../reconcile/model.js";
import type { PendingCrtListChange, Side, Verdict, VerdictClass } from "../../../reconcile/verdict.js";
import { keeperRef } from "./placement.js";

export type {
	PendingCrtListChange,
	RefusalCode,
	Side,
	Verdict,
	VerdictClass,
} from "../../../reconcile/verdict.js";

export interface DuplicatePolicy {
	/** "remove": delete confirmed duplicates once their keeper is stable; "report": keep them synced. */
	legacyDuplicates: "remove" | "report";
	/** Push a certificate even when it would stop covering a name the current one covers. */
	allowNameRemoval: boolean;
	/** Never replace a live certificate that expires later (downgrade.ts); the engine sets it in cluster mode. */
	neverDowngrade?: boolean;
}

export interface ClassifyInput {
	/** Desired certificates for this target, each with its canonical ref name. */
	desired: ReadonlyArray<{ ref: string; certificate: DesiredCertificate }>;
	refs: readonly ObservedRef[];
	policy: DuplicatePolicy;
	/** What a TLS probe saw, per SNI name, where probes are configured. */
	served?: readonly ServedCertificate[];
	/**
	 * No probe is configured: who serves a name that several refs hold is unknown. Each name of a desired
	 * certificate that a ref certificatee leaves alone also holds, with another certificate, is then `shadowed`
	 * (it may be what HAProxy serves), every cycle, so it is never reported converged.
	 */
	unprobed?: boolean;
	/** Refs whose removal an earlier cycle found refused by the configuration (ref -> why): pinned, not retried. */
	knownPinned?: ReadonlyMap<string, string>;
	/** The crt-lists HAProxy reports: a duplicate named by a file the target cannot edit is pinned by it. */
	crtLists?: readonly ObservedCrtList[];
}

/** Does one side hold exactly this leaf? Compares fingerprints where the side reports them, else serials. */
export function sideMatches(meta: RefMeta | undefined, leaf: CertificateInfo): boolean {
	if (meta === undefined) return false;
	if (meta.fingerprint !== undefined) return meta.fingerprint === leaf.fingerprint;
	if (meta.sha1 !== undefined && meta.sha1 !== leaf.sha1) return false;
	return meta.serial !== undefined && meta.serial === leaf.serial;
}

/** Does one side hold exactly this bundle: the leaf, and the chain as far as the side shows it? */
export function sideHolds(meta: RefMeta | undefined, bundle: Bundle): boolean {
	if (!sideMatches(meta, bundle.leaf) || meta?.keyMismatch === true) return false;
	return meta?.chain === undefined || chainMatches(meta.chain, bundle);
}

/** What the ref serves (runtime first), and whether only its DNS names are known. */
function namesOf(ref: ObservedRef): { names: string[]; dnsOnly: boolean } {
	const meta = ref.runtime?.names ? ref.runtime : ref.storage;
	return { names: nameSet(meta?.names ?? []), dnsOnly: meta?.namesDnsOnly === true };
}

function refNames(ref: ObservedRef): string[] {
	return namesOf(ref).names;
}

/** The desired names comparable with what the ref shows (its DNS names only, when the side lacks IPs). */
function comparableNames(d: DesiredCertificate, dnsOnly: boolean): string[] {
	return dnsOnly ? d.bundle.leaf.dnsNames : bundleNames(d.bundle);
}

/** Same public-key algorithm (HAProxy serves an RSA and an ECDSA certificate side by side); unknown matches. */
function sameKeyType(ref: ObservedRef, d: DesiredCertificate): boolean {
	const keyType = ref.runtime?.keyType ?? ref.storage?.keyType;
	return keyType === undefined || keyType === d.bundle.leaf.keyType;
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

function presentSides(ref: ObservedRef): Side[] {
	const sides: Side[] = [];
	if (ref.storage) sides.push("storage");
	if (ref.runtime) sides.push("runtime");
	return sides;
}

function staleSidesOf(ref: ObservedRef, bundle: Bundle): Side[] {
	return presentSides(ref).filter((side) => !sideHolds(ref[side], bundle));
}

function classifyCanonical(
	ref: string,
	desired: DesiredCertificate,
	observed: ObservedRef | undefined,
	policy: DuplicatePolicy,
): Verdict {
	const certificate = desired.name;
	if (observed === undefined || (!observed.storage && !observed.runtime))
		return { class: "missing", ref, certificate };
	const notWritable = placementRefusal(ref, certificate, observed);
	if (notWritable !== undefined) return notWritable;
	const stale = staleSidesOf(observed, desired.bundle);
	const missingSides: Side[] = (["storage", "runtime"] as const).filter((s) => observed[s] === undefined);
	if (stale.length === 0 && missingSides.length === 0) return { class: "in-sync", ref, certificate };
	// Only HAProxy's memory differs from a file that already holds the desired certificate (a stop or another
	// writer left storage ahead): it follows the file, which a reload would serve anyway, so nothing is refused.
	if (!stale.includes("storage") && !missingSides.includes("storage"))
		return { class: "stale", ref, certificate, sides: stale, missingSides };
	// An operator's deliberate replacement (a key compromise, a CA change) goes out over a later expiry.
	const downgrade =
		policy.neverDowngrade && desired.replacement === undefined
			? downgradeRefusal(
					stale.map((side) => observed[side]),
					desired.bundle.leaf,
				)
			: undefined;
	if (downgrade !== undefined)
		return { class: "refused", ref, certificate, code: "UPDATE_WOULD_DOWNGRADE", why: downgrade };
	if (!policy.allowNameRemoval) {
		const dropped = droppedNames(refNames(observed), bundleNames(desired.bundle));
		if (dropped.length > 0 && stale.length > 0) {
			return {
				class: "refused",
				ref,
				certificate,
				code: "UPDATE_DROPS_NAMES",
				why: `the new certificate would stop covering ${dropped.join(", ")}, which ${ref} covers now (set allow_name_removal to push it)`,
			};
		}
	}
	return { class: "stale", ref, certificate, sides: stale, missingSides };
}

/**
 * A keeper whose files certificatee must not write: HAProxy's own ACME manages it, or its files are unknown.
 * Refused (reported, nothing written) whether or not it is current.
 */
function placementRefusal(ref: string, certificate: string, observed: ObservedRef): Verdict | undefined {
	const p = observed.placement;
	if (p?.acme !== undefined) {
		return {
			class: "refused",
			ref,
			certificate,
			code: "MANAGED_BY_HAPROXY_ACME",
			why: `HAProxy's own ACME client (acme section "${p.acme}") manages ${ref}, which serves these names: certificatee never writes it. Remove the certificate from certificatee's configuration, or the acme keyword from its load line and reload`,
		};
	}
	if (p?.unknown !== undefined) {
		return { class: "refused", ref, certificate, code: "PLACEMENT_UNKNOWN", why: p.unknown, ...p.unknownAs };
	}
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

/**
 * A storage file the target cannot address by its name is never read, written or deleted. Its crt-list entry
 * and runtime certificate could be, by HAProxy's exact path, but a change there lives in memory only: the
 * next reload loads the file again as it is on disk, so it is left alone too.
 */
function unaddressable(observed: ObservedRef, addressedAs: string, certificate: string | undefined): Verdict {
	return {
		class: "unaddressable",
		ref: observed.ref,
		addressedAs,
		...(certificate === undefined ? {} : { certificate }),
		why: `the Data Plane API addresses ${observed.ref} as ${addressedAs} (it sanitises names): a request for it would read, replace or delete ${addressedAs} instead; left alone. Rename the file on disk to a name the API keeps unchanged (letters, digits, _ and - before the extension) and reload HAProxy`,
	};
}

/** Each desired certificate at its keeper: its canonical ref, or the ref HAProxy loads it from (placement.ts). */
export function keepersInPlace(
	desired: ClassifyInput["desired"],
	refs: ReadonlyMap<string, ObservedRef>,
): ClassifyInput["desired"] {
	const taken = new Set(desired.map((d) => d.ref));
	return desired.map((d) => {
		const ref = keeperRef(d.ref, d.certificate, refs, taken);
		taken.add(ref);
		return ref === d.ref ? d : { ref, certificate: d.certificate };
	});
}

export function classifyEndpoint(input: ClassifyInput): Verdict[] {
	const { refs, policy } = input;
	const byRef = new Map(refs.map((r) => [r.ref, r]));
	const desired = keepersInPlace(input.desired, byRef);
	const verdicts: Verdict[] = [];
	const canonical = new Map<string, Verdict>();

	for (const { ref, certificate } of desired) {
		const v = classifyCanonical(ref, certificate, byRef.get(ref), policy);
		canonical.set(ref, v);
		verdicts.push(v);
	}

	for (const observed of refs) {
		if (canonical.has(observed.ref)) continue;
		const { names, dnsOnly } = namesOf(observed);
		// A ref of another key type is not a duplicate: HAProxy serves it to clients of that key type.
		const sameKey = desired.filter((d) => sameKeyType(observed, d.certificate));
		const equal = sameKey.filter((d) => sameNameSet(comparableNames(d.certificate, dnsOnly), names));
		if (observed.unaddressable) {
			verdicts.push(unaddressable(observed, observed.unaddressable.addressedAs, equal[0]?.certificate.name));
			continue;
		}
		const overlapping = sameKey.filter(
			(d) =>
				!equal.includes(d) &&
				comparableNames(d.certificate, dnsOnly).some((n) => names.includes(n.toLowerCase())),
		);
		if (equal.length > 1 || (equal.length === 1 && overlapping.length > 0)) {
			verdicts.push({
				class: "ambiguous",
				ref: observed.ref,
				certificates: [...equal, ...overlapping].map((d) => d.certificate.name),
				why: "several desired certificates could be its keeper",
			});
			continue;
		}
		if (equal.length === 0 && overlapping.length > 0) {
			verdicts.push({
				class: "ambiguous",
				ref: observed.ref,
				certificates: overlapping.map((d) => d.certificate.name),
				why: `its names (${names.join(", ")}) overlap a desired certificate's without being equal`,
			});
			continue;
		}
		const match = equal[0];
		if (match === undefined) {
			verdicts.push({
				class: "unmanaged",
				ref: observed.ref,
				names,
				...(observed.runtime?.notAfter || observed.storage?.notAfter
					? { notAfter: (observed.runtime?.notAfter ?? observed.storage?.notAfter) as Date }
					: {}),
			});
			continue;
		}
		const unstable = keeperUnstable(match.ref, canonical.get(match.ref), byRef.get(match.ref), observed);
		const stability = {
			keeperStable: unstable === undefined,
			...(unstable ? { keeperUnstable: unstable } : {}),
		};
		const bundle = match.certificate.bundle;
		const base = { ref: observed.ref, certificate: match.certificate.name, keeper: match.ref };
		if (observed.external !== undefined) {
			// Its file is not the target's to write, and a change in memory only would not survive a reload.
			verdicts.push({ class: "pinned", ...base, staleSides: [], why: observed.external });
			continue;
		}
		const byFile = crtListFilePin(observed, input.crtLists);
		const pinned = pinnedReason(observed) ?? byFile?.why ?? input.knownPinned?.get(observed.ref);
		if (pinned !== undefined && policy.legacyDuplicates === "remove") {
			verdicts.push({
				class: "pinned",
				...base,
				staleSides: staleSidesOf(observed, bundle),
				why: pinned,
				...(byFile && pinned === byFile.why ? { pendingChange: byFile.pendingChange } : {}),
			});
		} else if (!observed.storage) {
			verdicts.push({
				class: "deleted-pending-reload",
				...base,
				...stability,
				runtimeStale: !sideHolds(observed.runtime, bundle),
			});
		} else {
			verdicts.push({
				class: "legacy-duplicate",
				...base,
				...stability,
				staleSides: staleSidesOf(observed, bundle),
			});
		}
	}

	if (input.unprobed) verdicts.push(...mayBeShadowed(desired, refs, verdicts));
	for (const served of input.served ?? []) {
		// An IP address is probed without SNI: what answers is the bind's default, not another ref winning a
		// name (the report says so: IP_NOT_DEFAULT_CERTIFICATE).
		if (isIP(served.sni) !== 0) continue;
		const covering = desired.filter((d) =>
			bundleNames(d.certificate.bundle).includes(served.sni.toLowerCase()),
		);
		const owner = covering.find((d) => d.certificate.bundle.leaf.keyType === served.keyType) ?? covering[0];
		if (owner === undefined || served.serial === owner.certificate.bundle.leaf.serial) continue;
		const culprit = refs.find((r) => r.runtime?.serial === served.serial);
		// The keeper serving its own old content is stale (its verdict says so), not shadowed by another ref.
		if (culprit !== undefined && culprit.ref === owner.ref) continue;
		verdicts.push({
			class: "shadowed",
			sni: served.sni,
			certificate: owner.certificate.name,
			servedSerial: served.serial,
			...(culprit ? { servedBy: culprit.ref } : {}),
			why: culprit
				? `HAProxy serves ${culprit.ref} (serial ${served.serial}) for ${served.sni}`
				: `HAProxy serves serial ${served.serial} for ${served.sni}, not the desired ${owner.certificate.bundle.leaf.serial}`,
		});
	}
	return verdicts;
}

/** Refs certificatee never writes or removes: whatever they hold for a name stays there. */
const LEFT_ALONE: ReadonlySet<VerdictClass> = new Set(["unaddressable", "ambiguous", "unmanaged"]);

/**
 * Without a probe: each DNS name of a desired certificate that a ref left alone holds in HAProxy's memory (in use,
 * same key type, another certificate). HAProxy serves the one whose SNI entries were inserted first, which the
 * observation does not show, so the desired certificate cannot be shown to be served there.
 */
function mayBeShadowed(
	desired: ClassifyInput["desired"],
	refs: readonly ObservedRef[],
	verdicts: readonly Verdict[],
): Verdict[] {
	const leftAlone = new Set(verdicts.flatMap((v) => ("ref" in v && LEFT_ALONE.has(v.class) ? [v.ref] : [])));
	const others = refs.filter(
		(r) =>
			leftAlone.has(r.ref) &&
			r.runtime !== undefined &&
			r.runtime.status !== "Unused" &&
			r.runtime.status !== "Empty",
	);
	const out: Verdict[] = [];
	for (const { ref, certificate } of desired) {
		const leaf = certificate.bundle.leaf;
		for (const sni of leaf.dnsNames) {
			if (sni.startsWith("*.")) continue;
			const other = others.find(
				(r) =>
					r.ref !== ref &&
					sameKeyType(r, certificate) &&
					!sideMatches(r.runtime, leaf) &&
					refNames(r).includes(sni.toLowerCase()),
			);
			if (other === undefined) continue;
			const expires = other.runtime?.notAfter ?? other.storage?.notAfter;
			out.push({
				class: "shadowed",
				sni,
				certificate: certificate.name,
				servedSerial: other.runtime?.serial ?? "",
				servedBy: other.ref,
				why: `HAProxy may serve ${other.ref}${other.runtime?.serial ? ` (serial ${other.runtime.serial}${expires ? `, expires ${expires.toISOString()}` : ""})` : ""} for ${sni}: it holds that name beside ${ref}, and with no probe configured certificatee cannot show which of them HAProxy serves`,
			});
		}
	}
	return out;
}
