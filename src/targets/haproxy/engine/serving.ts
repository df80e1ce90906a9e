/**
 * Which ref serves each name after a plan's runtime writes. Pure.
 *
 * HAProxy serves, for an SNI name and a key type, the certificate whose SNI entries were inserted first;
 * a runtime update (`commit ssl cert`) or a crt-list add inserts the written certificate's entries behind
 * every other one. So a keeper's hot update hands each name it shares with another certificate (one that
 * overlaps without being its duplicate, or that certificatee does not manage) to that certificate.
 * Where the keeper should serve the name (a reload would load it first, or it served the name before the
 * write), the plan re-inserts the other ref right after it
 * (`runtime-reinsert`: its own content, committed again), so the keeper keeps serving; where it cannot,
 * the handover is reported as `shadowed` before the write, naming the culprit.
 */
import { nameSet } from "../../../certificates/names.js";
import type { DesiredCertificate, ServedCertificate, ServingAfter } from "../../../reconcile/model.js";
import type { Verdict } from "./classify.js";
import type { HaproxyAction, HaproxyStep, ObservedRef } from "./model.js";

export type { ServingAfter };

export interface ServingInput {
	steps: readonly HaproxyStep[];
	refs: ReadonlyMap<string, ObservedRef>;
	desired: ReadonlyMap<string, DesiredCertificate>;
	/** Probe results before the writes: who serves each name now. */
	served?: readonly ServedCertificate[];
	/** The driver can perform `runtime-reinsert`; otherwise handovers are only reported. */
	reinserts: boolean;
}

export interface ServingPlan {
	/** The steps with re-inserts placed right after the keeper write they undo the handover of. */
	steps: HaproxyStep[];
	servingAfter: ServingAfter[];
	/** Names handed to another ref by a write, not prevented: reported before the write. */
	shadowed: Extract<Verdict, { class: "shadowed" }>[];
}

/** The refs HAProxy holds with SNI entries (used, not empty), by name, in the refs' order: built once per plan. */
function holdersByName(refs: ReadonlyMap<string, ObservedRef>): Map<string, ObservedRef[]> {
	const holders = new Map<string, ObservedRef[]>();
	for (const r of refs.values()) {
		if (r.runtime === undefined || r.runtime.status === "Unused" || r.runtime.status === "Empty") continue;
		for (const name of nameSet(r.runtime.names ?? [])) {
			const list = holders.get(name);
			if (list) list.push(r);
			else holders.set(name, [r]);
		}
	}
	return holders;
}

/** Refs whose SNI entries will be ahead of `keeper`'s for `sni` once `keeper` is written at step `at`. */
function aheadOf(
	input: ServingInput,
	holders: ReadonlyMap<string, readonly ObservedRef[]>,
	keeper: string,
	at: number,
	sni: string,
): ObservedRef[] {
	const step = input.steps[at];
	const desired =
		step && "certificate" in step.action ? input.desired.get(step.action.certificate) : undefined;
	const keyType = desired?.bundle.leaf.keyType;
	const later = input.steps.slice(at + 1);
	return (holders.get(sni) ?? []).filter((r) => {
		if (r.ref === keeper || r.runtime === undefined) return false;
		if (r.runtime.keyType !== undefined && keyType !== undefined && r.runtime.keyType !== keyType)
			return false;
		// A ref holding the very certificate being written (a duplicate kept current) serves it just as well.
		if (desired !== undefined && r.runtime.serial === desired.bundle.leaf.serial) return false;
		const writtenBefore = input.steps
			.slice(0, at)
			.some(
				(s) =>
					s.action.ref === r.ref && s.action.op === "runtime-set" && s.action.certificate === desired?.name,
			);
		if (writtenBefore) return false;
		// Removed, or written (re-inserted) after the keeper in this plan: not ahead of it.
		return !later.some(
			(s) =>
				s.action.ref === r.ref &&
				(s.action.op === "runtime-delete" ||
					s.action.op === "crt-list-remove" ||
					s.action.op === "runtime-set" ||
					s.action.op === "runtime-reinsert"),
		);
	});
}

/** The keeper as the write leaves it: its runtime name, the lists that load it, the serial it served before. */
interface KeeperView {
	runtimeName: string;
	crtLists: readonly string[];
	serial?: string;
}

/**
 * Should the keeper serve the name after the write? Where both are loaded from one crt directory, a reload
 * inserts them in file-name order (byte order), so the running worker should serve what a reload would.
 * Elsewhere only the probe tells: the keeper keeps serving what it served before the write.
 */
function keeperFirst(
	input: ServingInput,
	keeper: KeeperView,
	other: ObservedRef,
	sni: string,
	keyType: string | undefined,
): boolean {
	const dirOf = (name: string) => name.slice(0, name.lastIndexOf("/"));
	const dir = dirOf(keeper.runtimeName);
	if (
		other.runtimeName !== undefined &&
		dir === dirOf(other.runtimeName) &&
		keeper.crtLists.includes(dir) &&
		other.crtLists.includes(dir)
	) {
		return keeper.runtimeName < other.runtimeName;
	}
	const probe = input.served?.find(
		(s) => s.sni === sni && (s.keyType === undefined || s.keyType === keyType),
	);
	return probe !== undefined && keeper.serial !== undefined && probe.serial === keeper.serial;
}

/** HAProxy names it, and its content is readable where it lives: a combined PEM, or a placement naming its files. */
function reinsertable(r: ObservedRef): boolean {
	const p = r.placement;
	return (
		r.runtimeName !== undefined && (p === undefined || (p.unknown === undefined && p.certFile !== undefined))
	);
}

/** The re-insert of `r`, with the files HAProxy loaded it from (its certificate file, its separate key file). */
function reinsertOf(r: ObservedRef): Extract<HaproxyAction, { op: "runtime-reinsert" }> {
	const p = r.placement;
	const cert = p?.certFile;
	return {
		op: "runtime-reinsert",
		ref: r.ref,
		runtimeName: r.runtimeName as string,
		...(cert !== undefined ? { files: { cert, ...(p?.key ? { key: p.key.file } : {}) } } : {}),
	};
}

export function planServing(input: ServingInput): ServingPlan {
	const steps: HaproxyStep[] = [];
	const servingAfter: ServingAfter[] = [];
	const shadowed: ServingPlan["shadowed"] = [];
	const holders = holdersByName(input.refs);
	input.steps.forEach((step, at) => {
		steps.push(step);
		const { action } = step;
		if (action.op !== "runtime-set" && action.op !== "runtime-add") return;
		const desired = input.desired.get(action.certificate);
		if (desired === undefined) return;
		const keeper = input.refs.get(action.ref);
		const reinserted = new Set<string>();
		for (const sni of desired.bundle.leaf.dnsNames) {
			const ahead = aheadOf(input, holders, action.ref, at, sni);
			const other = ahead[0];
			if (other === undefined) {
				servingAfter.push({ sni, ref: action.ref, certificate: desired.name });
				continue;
			}
			const view: KeeperView = {
				runtimeName: action.runtimeName,
				crtLists: action.op === "runtime-add" ? [action.crtList] : (keeper?.crtLists ?? []),
				...(keeper?.runtime?.serial ? { serial: keeper.runtime.serial } : {}),
			};
			const fixable =
				input.reinserts &&
				ahead.every((r) => keeperFirst(input, view, r, sni, desired.bundle.leaf.keyType) && reinsertable(r));
			if (fixable) {
				for (const r of ahead) {
					if (reinserted.has(r.ref)) continue;
					reinserted.add(r.ref);
					steps.push({
						action: reinsertOf(r),
						why: `keeps ${action.ref} serving the names it shares with ${r.ref}: its update re-inserts ${action.ref}'s SNI entries behind ${r.ref}'s`,
					});
				}
				servingAfter.push({ sni, ref: action.ref, certificate: desired.name });
				continue;
			}
			const expires = other.runtime?.notAfter;
			const current = keeper?.runtime?.notAfter;
			const sooner = expires !== undefined && current !== undefined && expires < current;
			servingAfter.push({ sni, ref: other.ref, certificate: desired.name });
			shadowed.push({
				class: "shadowed",
				sni,
				certificate: desired.name,
				servedSerial: other.runtime?.serial ?? "",
				servedBy: other.ref,
				why: `after the runtime ${action.op === "runtime-add" ? "add" : "update"} of ${action.ref}, HAProxy serves ${other.ref} for ${sni}${expires ? ` (it expires ${expires.toISOString()}${sooner ? `, before ${action.ref}'s current certificate` : ""})` : ""}: the write inserts ${action.ref}'s SNI entries behind it; remove ${other.ref} or make its names equal to ${action.ref}'s`,
			});
		}
	});
	return { steps, servingAfter, shadowed };
}
