/**
 * Canary rollouts: a changed certificate goes to the canary endpoints first, is verified there by what they
 * serve, held for `hold`, and only then goes to the rest. The stage lives in the state store (`rollouts/<name>`,
 * etcd in a cluster), so a restart, SIGHUP or another member takes the rollout up where it stands.
 *
 * Stages of one certificate version: `canary` (pushed to the canaries only, waiting for them to verify) → `hold`
 * (every canary verified; the rest wait until `holdUntil`) → `rest` (pushed everywhere: the rollout is done).
 * A failed check on a canary makes it `halted` (the rest keep the old certificate); canaries are checked again
 * every cycle, so a halted rollout goes on to `hold` when they verify, and a new version (a fixed certificate)
 * starts over at `canary`. The decisions are pure functions of the record, the clock and the cycle's results;
 * rollout.ts keeps the records in the store and hands each endpoint its holds and checks.
 */
import { createHash } from "node:crypto";
import { formatDuration } from "../base/duration.js";
import type { TrustStore } from "../certificates/trust.js";
import type { Bundle } from "../certificates/types.js";
import type { DesiredCertificate } from "./model.js";
import type { HeldView } from "./report.js";
import type { CheckResult, RolloutCheck, RolloutFailure, RolloutStage, RolloutView } from "./rollout-view.js";

export interface RolloutPolicy {
	/** How many endpoints are canaries: a count, or a percentage of the rollout's endpoints (rounded up, ≥ 1). */
	canary: { count: number } | { percent: number };
	verify: readonly RolloutCheck[];
	holdMs: number;
	/** The store the canaries' served chains must verify against (the `trust` check). */
	trust?: TrustStore;
	/** Targets taking part (all HAProxy targets when absent) and certificates rolled out (all when absent). */
	targets?: readonly string[];
	certificates?: readonly string[];
}

/** The rollout of one certificate version, as stored. */
export interface RolloutRecord {
	certificate: string;
	/** Leaf and chain, hashed: a new chain for the same leaf is a new version too. */
	version: string;
	serial: string;
	stage: RolloutStage;
	/** "target/endpoint" of each canary, in the order they were chosen. */
	canaries: string[];
	startedAt: string;
	/** Canaries verified at this version (endpoint -> ISO time). */
	verified: Record<string, string>;
	holdUntil?: string;
	completedAt?: string;
	failure?: RolloutFailure;
}

/** The endpoints a rollout spans, in configuration order: "target/endpoint". */
export interface RolloutTarget {
	name: string;
	endpoints: readonly string[];
	carries(certificate: string): boolean;
}

export const endpointId = (target: string, endpoint: string) => `${target}/${endpoint}`;

export function versionOf(bundle: Bundle): string {
	return createHash("sha256")
		.update([bundle.leaf.fingerprint, ...bundle.chain.map((c) => c.fingerprint)].join(":"))
		.digest("hex")
		.slice(0, 32);
}

/** The canaries: the first N of the rollout's endpoints in configuration order (targets, then their endpoints). */
export function chooseCanaries(endpoints: readonly string[], canary: RolloutPolicy["canary"]): string[] {
	if (endpoints.length === 0) return [];
	const n = "count" in canary ? canary.count : Math.ceil((canary.percent / 100) * endpoints.length);
	return endpoints.slice(0, Math.max(1, Math.min(n, endpoints.length)));
}

/** A record at the start of a cycle: a new version starts over; a hold that is over lets the rest go. Pure. */
export function advance(
	record: RolloutRecord | undefined,
	certificate: DesiredCertificate,
	endpoints: readonly string[],
	policy: RolloutPolicy,
	now: Date,
): RolloutRecord {
	const version = versionOf(certificate.bundle);
	const canaries = chooseCanaries(endpoints, policy.canary);
	const sameCanaries =
		record !== undefined &&
		record.canaries.length === canaries.length &&
		record.canaries.every((c, i) => c === canaries[i]);
	if (record === undefined || record.version !== version || (!sameCanaries && record.stage !== "rest"))
		return {
			certificate: certificate.name,
			version,
			serial: certificate.bundle.leaf.serial,
			stage: "canary",
			canaries,
			startedAt: now.toISOString(),
			verified: {},
		};
	if (record.stage === "hold" && record.holdUntil !== undefined && now >= new Date(record.holdUntil))
		return { ...record, stage: "rest", completedAt: now.toISOString() };
	return record;
}

/** A record after the canaries this process ran were checked. Pure. */
export function afterChecks(
	record: RolloutRecord,
	results: ReadonlyMap<string, readonly CheckResult[]>,
	policy: RolloutPolicy,
	now: Date,
): RolloutRecord {
	if (record.stage === "rest") return record;
	const verified = { ...record.verified };
	let failure = record.failure;
	for (const canary of record.canaries) {
		const checks = results.get(canary);
		if (checks === undefined) continue;
		const failed = checks.find((c) => !c.ok);
		if (failed) {
			delete verified[canary];
			failure = {
				endpoint: canary,
				check: failed.check,
				code: failed.code ?? "ROLLOUT_CHECK_FAILED",
				message: failed.message ?? `${failed.check} check failed`,
				...(failed.hint ? { hint: failed.hint } : {}),
				at: now.toISOString(),
			};
		} else {
			// The first verification's time: a record that does not change is not written again.
			verified[canary] ??= now.toISOString();
			if (failure?.endpoint === canary) failure = undefined;
		}
	}
	const base = { ...record, verified };
	delete base.failure;
	if (failure) {
		delete base.holdUntil;
		return { ...base, stage: "halted", failure };
	}
	if (record.canaries.every((c) => verified[c] !== undefined)) {
		if (record.stage === "hold") return base;
		if (policy.holdMs === 0) return { ...base, stage: "rest", completedAt: now.toISOString() };
		return { ...base, stage: "hold", holdUntil: new Date(now.getTime() + policy.holdMs).toISOString() };
	}
	return { ...base, stage: record.stage === "halted" ? "canary" : record.stage };
}

/** Why a rest endpoint is held at this stage (pending: it keeps the old certificate on purpose). */
export function restHold(record: RolloutRecord): HeldView | undefined {
	const at = `rollout of ${record.certificate} (serial ${record.serial})`;
	const canaries = record.canaries.join(", ");
	const base = { certificate: record.certificate, kind: "rollout" as const, failed: false };
	switch (record.stage) {
		case "rest":
			return undefined;
		case "canary":
			return {
				...base,
				code: "ROLLOUT_CANARY",
				message: `${at}: waiting for the canaries (${canaries}) to serve and verify it`,
				hint: "the rest follows once every canary verified and the hold is over",
			};
		case "hold":
			return {
				...base,
				code: "ROLLOUT_HOLD",
				message: `${at}: verified on the canaries (${canaries}); held until ${record.holdUntil}`,
				hint: "the rest goes at the first cycle after the hold",
			};
		case "halted": {
			const f = record.failure;
			return {
				...base,
				code: "ROLLOUT_HALTED",
				message: `${at}: halted: ${f ? `${f.code} on canary ${f.endpoint}: ${f.message}` : "a canary failed"}; this endpoint keeps the certificate it serves`,
				hint: f?.hint ?? "fix the certificate: a new version starts the rollout again",
			};
		}
	}
}

export function viewOf(record: RolloutRecord, endpoints: readonly string[]): RolloutView {
	return {
		certificate: record.certificate,
		serial: record.serial,
		stage: record.stage,
		canaries: record.canaries,
		rest: endpoints.filter((e) => !record.canaries.includes(e)),
		startedAt: record.startedAt,
		verified: Object.keys(record.verified),
		...(record.holdUntil ? { holdUntil: record.holdUntil } : {}),
		...(record.completedAt ? { completedAt: record.completedAt } : {}),
		...(record.failure ? { failure: record.failure } : {}),
	};
}

/** "hold 30s" for plans. */
export function holdText(ms: number): string {
	return ms === 0 ? "no hold" : `hold ${formatDuration(ms)}`;
}
