/** The verdict on a keeper: the ref a desired certificate belongs in (missing, in sync, stale or refused). Pure. */
import { bundleNames } from "../../../certificates/bundle.js";
import { droppedNames, uncoveredNames } from "../../../certificates/names.js";
import { downgradeRefusal } from "../../../reconcile/downgrade.js";
import type { DesiredCertificate } from "../../../reconcile/model.js";
import type { Side, Verdict } from "../../../reconcile/verdict.js";
import type { DuplicatePolicy } from "./classification.js";
import type { ObservedRef } from "./model.js";
import { comparableNames, refNames, staleSidesOf } from "./ref-content.js";

export function classifyKeeper(
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
	const sctl = sctlRefusal(ref, certificate, observed, [...stale, ...missingSides]);
	if (sctl !== undefined) return sctl;
	const memoryOnly = !stale.includes("storage") && !missingSides.includes("storage");
	// An operator's deliberate replacement (a key compromise, a CA change) goes out over a later expiry. Checked
	// before the memory-follows-the-file rule below: a member whose desired set is behind (one resumed after a
	// SIGSTOP, mid-cycle) can read the file before the leader rewrites it and the memory after, and must not push
	// its older certificate into memory. There only a later certificate of these names counts: another
	// certificate's content (two writers crossed in HAProxy's one transaction) follows the file.
	const guarded = memoryOnly
		? stale.filter((side) => {
				const live = observed[side];
				const wanted = comparableNames(desired, live?.namesDnsOnly === true);
				return uncoveredNames(live?.names ?? [], wanted).length === 0;
			})
		: stale;
	const downgrade =
		policy.neverDowngrade && desired.replacement === undefined
			? downgradeRefusal(
					guarded.map((side) => observed[side]),
					desired.bundle.leaf,
				)
			: undefined;
	if (downgrade !== undefined)
		return { class: "refused", ref, certificate, code: "UPDATE_WOULD_DOWNGRADE", why: downgrade };
	// Only HAProxy's memory differs from a file that already holds the desired certificate (a stop or another
	// writer left storage ahead): it follows the file, which a reload would serve anyway, so nothing else is
	// refused.
	if (memoryOnly) return { class: "stale", ref, certificate, sides: stale, missingSides };
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

/**
 * HAProxy 2.6-3.4 crash (a segfault of the worker, then the master exits) on `set ssl cert` + `commit ssl cert`
 * of a certificate loaded with an `.sctl` file, whatever the new content: never update its memory. Its file
 * alone may be written (a reload would load it).
 */
function sctlRefusal(
	ref: string,
	certificate: string,
	observed: ObservedRef,
	sides: readonly Side[],
): Verdict | undefined {
	if (observed.placement?.sctlLoaded !== true || !sides.includes("runtime")) return undefined;
	const file = observed.placement.extras.sctl;
	return {
		class: "refused",
		ref,
		certificate,
		code: "SCTL_HOT_SWAP_UNSAFE",
		why: `HAProxy holds signed certificate timestamps for ${ref}${file ? ` (${file})` : ""}: a runtime update of such a certificate crashes HAProxy 2.6-3.4, so certificatee does not write it. Remove the .sctl file and reload HAProxy once`,
	};
}
