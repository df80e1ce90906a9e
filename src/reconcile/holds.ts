/** Certificates held back from a target because their chain does not verify: one rule for every target kind. */
import { type TrustStore, verifyBundle } from "../certificates/trust.js";
import type { DesiredCertificate } from "./model.js";
import type { HeldView } from "./report.js";

/** The certificates whose chain the target's trust store rejects: held on every endpoint, each a failure. */
export function trustHolds(
	target: string,
	desired: ReadonlyArray<{ certificate: DesiredCertificate }>,
	trust: TrustStore | undefined,
	now: Date,
	certificateTrust?: (certificate: string) => TrustStore | undefined,
	verify: typeof verifyBundle = verifyBundle,
): Map<string, HeldView> {
	const holds = new Map<string, HeldView>();
	for (const { certificate } of desired) {
		// The certificate's own store first, then the target's: the chain must verify against each one set.
		const stores = [certificateTrust?.(certificate.name), trust].filter((t) => t !== undefined);
		const verdict = stores
			.map((store) => verify(certificate.bundle, store, now, `certificate ${certificate.name}`))
			.find((v) => !v.ok);
		if (verdict === undefined || verdict.ok) continue;
		holds.set(certificate.name, {
			certificate: certificate.name,
			kind: "trust",
			code: verdict.code,
			message: `${verdict.message}; not pushed to target ${target}`,
			hint: verdict.hint,
			failed: true,
		});
	}
	return holds;
}
