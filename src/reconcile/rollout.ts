/**
 * The canary rollouts of a cycle: each certificate's record read from the state store (`rollouts/<name>`, etcd in
 * a cluster) and advanced at the start of a cycle, each endpoint told what it holds back and what its canaries
 * check, and the canaries' results written back at the end (compare-and-swap: another member's move wins).
 * The decisions themselves are pure, in rollout-stages.ts.
 */
import { createHash } from "node:crypto";
import { CertificateeError } from "../errors.js";
import type { StateStore } from "../store/types.js";
import type { DesiredCertificate } from "./model.js";
import type { CycleMode, CycleReport, HeldView } from "./report.js";
import {
	advance,
	afterChecks,
	endpointId,
	type RolloutPolicy,
	type RolloutRecord,
	type RolloutTarget,
	restHold,
	viewOf,
} from "./rollout-stages.js";
import type { CheckResult, RolloutView, VerifySpec } from "./rollout-view.js";

/** A rollout's word on a target's endpoints this cycle: certificates held back, and those a canary verifies. */
export interface TargetRollout {
	forEndpoint(endpoint: string): {
		holds: ReadonlyMap<string, HeldView>;
		verify: ReadonlyMap<string, VerifySpec>;
	};
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

/**
 * What one endpoint ("target/endpoint") does about each rollout that spans it: a canary verifies the certificate
 * (sync, until the rollout is done), any other endpoint holds it back until its stage lets it go. Pure.
 */
function endpointRollout(
	records: Iterable<{ record: RolloutRecord; endpoints: readonly string[] }>,
	id: string,
	policy: RolloutPolicy,
	mode: CycleMode,
): { holds: Map<string, HeldView>; verify: Map<string, VerifySpec> } {
	const holds = new Map<string, HeldView>();
	const verify = new Map<string, VerifySpec>();
	for (const { record, endpoints } of records) {
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
		if (hold) holds.set(record.certificate, hold);
	}
	return { holds, verify };
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
						forEndpoint: (endpoint) =>
							endpointRollout(records.values(), endpointId(target, endpoint), policy, mode),
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
