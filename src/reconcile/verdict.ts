/**
 * What a plan found, per ref, in words every view reads (reports, status, metrics): the verdicts. The HAProxy
 * engine (targets/haproxy/engine/classify.ts) and the directory kind (targets/directory/plan.ts) both speak it.
 */

export type Side = "storage" | "runtime";

export type Verdict =
	| { class: "in-sync"; ref: string; certificate: string }
	| { class: "stale"; ref: string; certificate: string; sides: Side[]; missingSides: Side[] }
	| { class: "missing"; ref: string; certificate: string }
	| {
			class: "refused";
			ref: string;
			certificate: string;
			code: RefusalCode;
			why: string;
			/** What to do, when it depends on the ref (a file and line to fix): else the code's own hint. */
			hint?: string;
	  }
	| {
			class: "legacy-duplicate";
			ref: string;
			certificate: string;
			keeper: string;
			keeperStable: boolean;
			/** Why the keeper is not stable yet (removing the duplicate would hand its names to another certificate). */
			keeperUnstable?: string;
			/** Sides of the duplicate whose content differs from the desired certificate. */
			staleSides: Side[];
	  }
	| {
			class: "deleted-pending-reload";
			ref: string;
			certificate: string;
			keeper: string;
			keeperStable: boolean;
			keeperUnstable?: string;
			runtimeStale: boolean;
	  }
	| {
			class: "pinned";
			ref: string;
			certificate: string;
			keeper: string;
			staleSides: Side[];
			why: string;
			/** The configuration change that would free it: lines to remove from a crt-list file. */
			pendingChange?: PendingCrtListChange;
	  }
	| { class: "ambiguous"; ref: string; certificates: string[]; why: string }
	| {
			class: "shadowed";
			sni: string;
			certificate: string;
			servedSerial: string;
			servedBy?: string;
			why: string;
	  }
	| { class: "unmanaged"; ref: string; notAfter?: Date; names: string[] }
	| {
			class: "unaddressable";
			ref: string;
			/** The name a request for `ref` would really reach. */
			addressedAs: string;
			/** The desired certificate whose names it carries, if any. */
			certificate?: string;
			why: string;
	  };

export type VerdictClass = Verdict["class"];

/** A verdict on the ref a certificate belongs in on an endpoint (its own ref), not on a duplicate or another's. */
export type CanonicalVerdict = Extract<Verdict, { class: "in-sync" | "stale" | "missing" | "refused" }>;

const CANONICAL: ReadonlySet<VerdictClass> = new Set(["in-sync", "stale", "missing", "refused"]);

export function isCanonical(v: Verdict): v is CanonicalVerdict {
	return CANONICAL.has(v.class);
}

/** Why an update of a ref is refused: it would drop served names, or replace a certificate that expires later. */
export type RefusalCode =
	| "UPDATE_DROPS_NAMES"
	| "UPDATE_WOULD_DOWNGRADE"
	/** HAProxy's own ACME client manages the certificate HAProxy serves for these names (3.2+). */
	| "MANAGED_BY_HAPROXY_ACME"
	/** HAProxy loads it from files certificatee cannot tell (a crt-store base runtime does not print). */
	| "PLACEMENT_UNKNOWN"
	/** HAProxy loaded signed certificate timestamps (.sctl) with it: a runtime update crashes HAProxy 2.6-3.4. */
	| "SCTL_HOT_SWAP_UNSAFE"
	/** The configuration HAProxy runs (haproxy_config) cannot be read or parsed: refs that depend on it. */
	| "HAPROXY_CONFIG_INVALID"
	/** haproxy_config disagrees with what the running HAProxy holds (or with crt_stores). */
	| "HAPROXY_CONFIG_MISMATCH";

/** Lines an operator has to remove from a crt-list file the target cannot edit itself. */
export interface PendingCrtListChange {
	file: string;
	removeLines: string[];
}
