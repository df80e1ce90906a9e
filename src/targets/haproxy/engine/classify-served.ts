/**
 * Names a desired certificate may not be served for: another ref wins them, as a probe saw (`shadowedByProbe`),
 * or may win them, with no probe to tell (`mayBeShadowed`). Pure.
 */
import { isIP } from "node:net";
import { bundleNames } from "../../../certificates/bundle.js";
import type { ServedCertificate } from "../../../reconcile/model.js";
import type { Verdict, VerdictClass } from "../../../reconcile/verdict.js";
import type { ClassifyInput } from "./classification.js";
import type { ObservedRef } from "./model.js";
import { refNames, sameKeyType, sideMatches } from "./ref-content.js";

/** Each probed name whose desired certificate HAProxy does not serve, and which ref serves it instead if known. */
export function shadowedByProbe(
	desired: ClassifyInput["desired"],
	refs: readonly ObservedRef[],
	served: readonly ServedCertificate[],
): Verdict[] {
	const out: Verdict[] = [];
	for (const s of served) {
		// An IP address is probed without SNI: what answers is the bind's default, not another ref winning a
		// name (the report says so: IP_NOT_DEFAULT_CERTIFICATE).
		if (isIP(s.sni) !== 0) continue;
		const covering = desired.filter((d) => bundleNames(d.certificate.bundle).includes(s.sni.toLowerCase()));
		const owner = covering.find((d) => d.certificate.bundle.leaf.keyType === s.keyType) ?? covering[0];
		if (owner === undefined || s.serial === owner.certificate.bundle.leaf.serial) continue;
		const culprit = refs.find((r) => r.runtime?.serial === s.serial);
		// The keeper serving its own old content is stale (its verdict says so), not shadowed by another ref.
		if (culprit !== undefined && culprit.ref === owner.ref) continue;
		out.push({
			class: "shadowed",
			sni: s.sni,
			certificate: owner.certificate.name,
			servedSerial: s.serial,
			...(culprit ? { servedBy: culprit.ref } : {}),
			why: culprit
				? `HAProxy serves ${culprit.ref} (serial ${s.serial}) for ${s.sni}`
				: `HAProxy serves serial ${s.serial} for ${s.sni}, not the desired ${owner.certificate.bundle.leaf.serial}`,
		});
	}
	return out;
}

/** Refs certificatee never writes or removes: whatever they hold for a name stays there. */
const LEFT_ALONE: ReadonlySet<VerdictClass> = new Set(["unaddressable", "ambiguous", "unmanaged"]);

/**
 * Without a probe: each DNS name of a desired certificate that a ref left alone holds in HAProxy's memory (in use,
 * same key type, another certificate). HAProxy serves the one whose SNI entries were inserted first, which the
 * observation does not show, so the desired certificate cannot be shown to be served there.
 */
export function mayBeShadowed(
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
