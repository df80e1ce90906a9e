/**
 * Canary rollouts: a changed certificate goes to the canary endpoints first, is verified there by what they
 * serve, held for `hold`, and only then goes to the rest. The stage lives in the state store (`rollouts/<name>`,
 * etcd in a cluster), so a restart, SIGHUP or another member takes the rollout up where it stands.
 *
 * Stages of one certificate version: `canary` (pushed to the canaries only, waiting for them to verify) → `hold`
 * (every canary verified; the rest wait until `holdUntil`) → `rest` (pushed everywhere: the rollout is done).
 * A failed check on a canary makes it `halted` (the rest keep the old certificate); canaries are checked again
 * every cycle, so a halted rollout goes on to `hold` when they verify, and a new version (a fixed certificate)
 * starts over at `canary`. The decisions are pure functions of the record, the clock and the cycle's results.
 */
import { createHash } from "node:crypto";
import { formatDuration } from "../base/duration.js";
import type { TrustStore } from "../certificates/trust.js";
import type { Bundle } from "../certificates/types.js";
import { CertificateeError } from "../errors.js";
import type { StateStore } from "../store/types.js";
import type { CycleMode, TargetRollout } from "./cycle.js";
import type { DesiredCertificate } from "./model.js";
import type { CycleReport, HeldView } from "./report.js";

export type RolloutCheck = "serial" | "chain" | "key-types" | "trust";
export type RolloutStage = "canary" | "hold" | "rest" | "halted";

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

/** What a canary check found, as the endpoint report carries it. */
export interface CheckResult {
	certificate: string;
	check: RolloutCheck;
	ok: boolean;
	code?: string;
	message?: string;
	hint?: string;
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
	failure?: {
		endpoint: string;
		check: RolloutCheck;
		code: string;
		message: string;
		hint?: string;
		at: string;
	};
}

/** A rollout as plan, status, /status.json and the metrics show it. */
export interface RolloutView {
	certificate: string;
	serial: string;
	stage: RolloutStage;
	canaries: string[];
	/** The endpoints after the canaries, in the order they go (all at once, once the hold is over). */
	rest: string[];
	startedAt: string;
	verified: string[];
	holdUntil?: string;
	completedAt?: string;
	failure?: RolloutRecord["failure"];
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

/** What the canaries of a certificate check, and against what. */
export interface VerifySpec {
	checks: readonly RolloutCheck[];
	trust?: TrustStore;
}

/** One cycle's rollouts: what each endpoint holds back or verifies, and the records read at its start. */
export interface CycleRollouts {
	forTarget(target: string): TargetRollout;
	records: ReadonlyMap<string, { record: RolloutRecord; version: number; endpoints: string[] }>;
}

export interface RolloutCoordinator {
	begin(
		desired: readonly DesiredCertificate[],
		targets: readonly RolloutTarget[],
		mode: CycleMode,
	): Promise<CycleRollouts>;
	/** sync: records what the canaries showed; returns every rollout's view for the report. */
	finish(cycle: CycleRollouts, report: CycleReport, mode: CycleMode): Promise<RolloutView[]>;
	/** The end of the earliest hold (the daemon wakes then). */
	nextWake(): Date | undefined;
}

/** A store key segment for any certificate name ([A-Za-z0-9._-], else a hash). */
export function rolloutKey(certificate: string): string {
	return /^[A-Za-z0-9._-]+$/.test(certificate)
		? `rollouts/${certificate}`
		: `rollouts/_${createHash("sha256").update(certificate).digest("hex").slice(0, 32)}`;
}

function isRecord(value: unknown): value is RolloutRecord {
	if (typeof value !== "object" || value === null) return false;
	const v = value as Record<string, unknown>;
	return (
		typeof v.certificate === "string" &&
		typeof v.version === "string" &&
		typeof v.stage === "string" &&
		Array.isArray(v.canaries) &&
		typeof v.verified === "object"
	);
}

export function createRolloutCoordinator(deps: {
	store: StateStore;
	policy: RolloutPolicy;
	readOnly: boolean;
	now: () => Date;
}): RolloutCoordinator {
	const { policy } = deps;
	let holds: Date[] = [];
	const inScope = (certificate: string) => policy.certificates?.includes(certificate) ?? true;
	const read = async (key: string) => {
		const got = await deps.store.get(key);
		if (got === undefined) return undefined;
		if (!isRecord(got.value))
			throw new CertificateeError("STATE_CORRUPT", `state record ${key} is not a rollout record`, {
				context: { file: deps.store.location?.(key) ?? key },
				hint: "delete the record: the rollout of that certificate starts again at its canaries",
			});
		return { record: got.value, version: got.version };
	};
	/** Writes a record with compare-and-swap; on a conflict another member moved first: its record wins. */
	const write = async (key: string, record: RolloutRecord, version: number) => {
		try {
			return { record, version: await deps.store.put(key, record, version) };
		} catch (e) {
			if (!(e instanceof CertificateeError) || e.code !== "STATE_CONFLICT") throw e;
			const theirs = await read(key);
			return theirs ?? { record, version: 0 };
		}
	};
	return {
		async begin(desired, targets, mode) {
			const now = deps.now();
			const records = new Map<string, { record: RolloutRecord; version: number; endpoints: string[] }>();
			const joined = targets.filter((t) => policy.targets?.includes(t.name) ?? true);
			for (const certificate of desired) {
				if (!inScope(certificate.name)) continue;
				const endpoints = joined
					.filter((t) => t.carries(certificate.name))
					.flatMap((t) => t.endpoints.map((e) => endpointId(t.name, e)));
				if (endpoints.length < 2) continue;
				const key = rolloutKey(certificate.name);
				const stored = await read(key);
				const record = advance(stored?.record, certificate, endpoints, policy, now);
				let entry = { record, version: stored?.version ?? 0, endpoints };
				if (mode === "sync" && !deps.readOnly && record !== stored?.record) {
					const written = await write(key, record, stored?.version ?? 0);
					entry = { ...written, endpoints };
				}
				records.set(certificate.name, entry);
			}
			holds = [...records.values()].flatMap(({ record }) =>
				record.stage === "hold" && record.holdUntil ? [new Date(record.holdUntil)] : [],
			);
			return {
				records,
				forTarget(target) {
					return {
						forEndpoint(endpoint) {
							const id = endpointId(target, endpoint);
							const held = new Map<string, HeldView>();
							const verify = new Map<string, VerifySpec>();
							for (const { record, endpoints } of records.values()) {
								if (!endpoints.includes(id)) continue;
								if (record.canaries.includes(id)) {
									if (mode === "sync" && record.stage !== "rest")
										verify.set(record.certificate, {
											checks: policy.verify,
											...(policy.trust ? { trust: policy.trust } : {}),
										});
									continue;
								}
								const hold = restHold(record);
								if (hold) held.set(record.certificate, hold);
							}
							return { holds: held, verify };
						},
					};
				},
			};
		},
		async finish(cycle, report, mode) {
			const now = deps.now();
			const views: RolloutView[] = [];
			const byEndpoint = new Map<string, CheckResult[]>();
			for (const t of report.targets)
				for (const e of t.endpoints)
					if (e.ok && e.rolloutChecks) byEndpoint.set(endpointId(t.target, e.endpoint), e.rolloutChecks);
			for (const [name, entry] of cycle.records) {
				let { record } = entry;
				if (mode === "sync" && !deps.readOnly) {
					const results = new Map<string, CheckResult[]>();
					for (const canary of record.canaries) {
						const checks = byEndpoint.get(canary)?.filter((c) => c.certificate === name);
						if (checks && checks.length > 0) results.set(canary, checks);
					}
					const next = afterChecks(record, results, policy, now);
					if (JSON.stringify(next) !== JSON.stringify(record)) {
						// Another member may have moved the record since the cycle began: apply the results to its view.
						const key = rolloutKey(name);
						const current = await read(key);
						const base = current?.record.version === record.version ? current.record : record;
						const merged = afterChecks(base, results, policy, now);
						record = (await write(key, merged, current?.version ?? 0)).record;
					}
				}
				if (record.stage === "hold" && record.holdUntil) holds.push(new Date(record.holdUntil));
				views.push(viewOf(record, entry.endpoints));
			}
			return views;
		},
		nextWake() {
			const now = deps.now().getTime();
			const future = holds.filter((d) => d.getTime() > now).sort((a, b) => a.getTime() - b.getTime());
			return future[0];
		},
	};
}

/** "hold 30s" for plans. */
export function holdText(ms: number): string {
	return ms === 0 ? "no hold" : `hold ${formatDuration(ms)}`;
}
