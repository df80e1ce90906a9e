/** What classifying one endpoint reads: the desired certificates, the observation, the policy. */
import type { DesiredCertificate, ServedCertificate } from "../../../reconcile/model.js";
import type { Verdict } from "../../../reconcile/verdict.js";
import type { ObservedCrtList, ObservedRef } from "./model.js";

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

/** What the rules share while one endpoint is classified: the input, its keepers, and their verdicts so far. */
export interface ClassifyContext {
	input: ClassifyInput;
	/** Each desired certificate at its keeper (keepersInPlace). */
	desired: ClassifyInput["desired"];
	byRef: ReadonlyMap<string, ObservedRef>;
	/** The keepers' verdicts, by ref. */
	keepers: ReadonlyMap<string, Verdict>;
}
