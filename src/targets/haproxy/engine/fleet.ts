/**
 * A target made of HAProxy endpoints (the Data Plane API fleet, or one runtime-socket node): runs the
 * three phases on every endpoint with bounded concurrency; one endpoint's failure never stops the others.
 */
import { setMaxListeners } from "node:events";
import pLimit from "p-limit";
import { formatDuration } from "../../../base/duration.js";
import { createTrustCache, type TrustStore } from "../../../certificates/trust.js";
import type { TargetRunner } from "../../../reconcile/cycle.js";
import { selectCertificates } from "../../../reconcile/cycle.js";
import { trustHolds } from "../../../reconcile/holds.js";
import type { DesiredCertificate } from "../../../reconcile/model.js";
import type { CycleMode } from "../../../reconcile/report.js";
import {
	type EndpointReport,
	emptyEndpointReport,
	type HeldView,
	type TargetReport,
} from "../../../reconcile/report.js";
import type { TargetRollout } from "../../../reconcile/rollout.js";
import type { VerifySpec } from "../../../reconcile/rollout-view.js";
import { canonicalCollisions, canonicalRef } from "../naming.js";
import type { DuplicatePolicy } from "./classify.js";
import { processEndpoint } from "./endpoint.js";
import type { EndpointMemory, FleetMemory } from "./fleet-memory.js";
import { desiredKey } from "./full-schedule.js";
import type { EndpointDriver } from "./model.js";
import type { WriteQueues } from "./writers.js";

export interface FleetOptions {
	name: string;
	kind: string;
	endpoints: readonly EndpointDriver[];
	policy: DuplicatePolicy;
	/** The directory HAProxy loads storage files from, as HAProxy names them. */
	storageDir: string;
	/** Where new certificates are made live at runtime (a crt-list, or the crt directory). */
	newCertificateCrtList?: string;
	/** newCertificateCrtList is the storage directory by default (see PlanInput.newCertificateDirDefault). */
	newCertificateDirDefault?: boolean;
	certificates?: readonly string[];
	/** Endpoints processed at once (default 8: each holds its observation until it is classified, so fewer at once
	 * bound the memory of a large fleet; each endpoint runs 16 GETs at once, so the requests in flight stay 128). */
	concurrency?: number;
	/** The engine's write queues, one per HAProxy process, and the address each endpoint writes to. */
	writers?: { queues: WriteQueues; addressOf(endpoint: string): string };
	/** Where backoff and pinned duplicates outlive the process (without it, they live as long as the runner). */
	memory?: FleetMemory;
	/** Sit out cycles after failures (the daemon). false: try every endpoint, still counting failures (`sync --once`). */
	backoff?: boolean;
	/** A cluster sharding endpoints: whether this replica runs the endpoint this cycle (absent: every one). */
	owns?: (endpoint: string) => boolean;
	/** The target's `reloads` (docs/reloads.md); absent: never reload, nothing reported. */
	reloads?: { maxPerHour: number };
	/** The target's `trust_store`: a chain that does not verify against it is never pushed (held, a failure). */
	trust?: TrustStore;
	/** A certificate's own `trust_store` (certificates[]), checked as well as the target's. */
	certificateTrust?: (certificate: string) => TrustStore | undefined;
	/** The target's endpoint_deadline: an endpoint's whole part of a cycle; past it, failed for the cycle. */
	endpointDeadlineMs?: number;
	now: () => Date;
}

/** Cycles an endpoint sits out after n consecutive failures: 0, 1, 2, 4, 8, then 8 (never forever). */
export function cyclesToSkip(consecutiveFailures: number): number {
	return consecutiveFailures <= 1 ? 0 : Math.min(8, 2 ** (consecutiveFailures - 2));
}

export function createFleetRunner(options: FleetOptions): TargetRunner {
	// Per endpoint: an endpoint that keeps failing backs off (skips sync cycles) without slowing the others;
	// duplicates whose removal it refused (direct crt line) are remembered so removal is not retried.
	let loaded: Map<string, EndpointMemory> | undefined;
	// Chains checked against the trust stores, kept between cycles (an unchanged chain is not verified again).
	const verify = createTrustCache();
	const remembered = async () => {
		const names = options.endpoints.map((e) => e.name);
		if (options.memory?.shared) return options.memory.load(names);
		loaded ??= (await options.memory?.load(names)) ?? new Map();
		return loaded;
	};
	const processOne = async (
		driver: EndpointDriver,
		job: EndpointJob,
		memory: Map<string, EndpointMemory>,
	): Promise<EndpointReport> => {
		const state = memory.get(driver.name) ?? { failures: 0, skipLeft: 0, pinned: {} };
		const backoff =
			state.failures > 0 ? { backoff: { failures: state.failures, skipLeft: state.skipLeft } } : {};
		// plan and status observe an endpoint sync sits out (one look, no writes) and show its backoff.
		if (state.skipLeft > 0 && job.mode === "sync" && options.backoff !== false) {
			memory.set(driver.name, { ...state, skipLeft: state.skipLeft - 1 });
			return skippedReport(options.name, driver.name, state.failures, state.skipLeft - 1);
		}
		const knownPinned = new Map(Object.entries(state.pinned));
		const writers = options.writers;
		const report = await withinDeadline(options, driver.name, job.signal, (signal) =>
			processEndpoint({
				...job,
				signal,
				driver,
				...(knownPinned.size > 0 ? { knownPinned } : {}),
				...(writers ? { writers: { queues: writers.queues, address: writers.addressOf(driver.name) } } : {}),
				...(options.reloads ? { reloads: reloadMemory(options.reloads.maxPerHour, state) } : {}),
			}),
		);
		if (job.mode === "plan") return { ...report, ...backoff };
		if (report.ok) {
			memory.set(driver.name, {
				failures: 0,
				skipLeft: 0,
				// A crt-list file line is seen every cycle: not remembered, so removing the line frees the duplicate.
				pinned: Object.fromEntries(
					report.verdicts.flatMap((v) =>
						v.class === "pinned" && !v.pendingChange ? [[v.ref, v.why] as const] : [],
					),
				),
				...reloadsToRemember(report),
			});
		} else {
			const failures = state.failures + 1;
			memory.set(driver.name, { ...state, failures, skipLeft: cyclesToSkip(failures) });
		}
		return report;
	};
	return {
		name: options.name,
		kind: options.kind,
		endpoints: options.endpoints.map((e) => e.name),
		carries: (certificate) => options.certificates?.includes(certificate) ?? true,
		async run(
			all: readonly DesiredCertificate[],
			mode: CycleMode,
			signal: AbortSignal,
			onEndpoint?: (report: EndpointReport) => void,
			rollout?: TargetRollout,
		): Promise<TargetReport> {
			const { desired, collisionNotes } = withoutCollisions(selectCertificates(all, options.certificates));
			const holds = trustHolds(
				options.name,
				desired,
				options.trust,
				options.now(),
				options.certificateTrust,
				verify,
			);
			const limit = pLimit(options.concurrency ?? 8);
			const memory = await remembered();
			const owned = options.owns ? options.endpoints.filter((e) => options.owns!(e.name)) : options.endpoints;
			const shared = fleetJob(options, desired, mode, signal);
			const endpoints = await Promise.all(
				owned.map((driver) =>
					limit(() =>
						processOne(
							driver,
							{
								...rolloutJob(holds, rollout?.forEndpoint(driver.name), options.trust),
								...shared,
							},
							memory,
						).then((report) => {
							if (collisionNotes.length > 0) report.notes.push(...collisionNotes);
							onEndpoint?.(report);
							return report;
						}),
					),
				),
			);
			if (mode === "sync")
				await options.memory?.save(
					memory,
					owned.map((e) => e.name),
				);
			return { target: options.name, kind: options.kind, endpoints };
		},
	};
}

/** What processEndpoint is given for one endpoint, but the endpoint's driver. */
type EndpointJob = Omit<Parameters<typeof processEndpoint>[0], "driver">;

/**
 * Names that collide on one ref (possible from sources; the config's are rejected by validation) would overwrite
 * each other every cycle: neither is written, and every endpoint report says so.
 */
function withoutCollisions(selected: readonly DesiredCertificate[]): {
	desired: EndpointJob["desired"];
	collisionNotes: string[];
} {
	const collisions = canonicalCollisions(selected.map((c) => c.name));
	const colliding = new Set(collisions.flatMap((c) => c.names));
	const collisionNotes = collisions.map(
		(c) =>
			`${c.ref}: certificates ${c.names.map((n) => `"${n}"`).join(" and ")} all become ${c.ref} on this target; none of them is written (rename all but one)`,
	);
	const desired = selected
		.filter((certificate) => !colliding.has(certificate.name))
		.map((certificate) => ({ ref: canonicalRef(certificate.name), certificate }));
	return { desired, collisionNotes };
}

/** The part of an endpoint's job every endpoint of the target shares this cycle. */
function fleetJob(
	options: FleetOptions,
	desired: EndpointJob["desired"],
	mode: CycleMode,
	signal: AbortSignal,
): Omit<EndpointJob, "holds" | "verify"> {
	return {
		target: options.name,
		desired,
		desiredKey: desiredKey(desired),
		policy: options.policy,
		storageDir: options.storageDir,
		...(options.newCertificateCrtList ? { newCertificateCrtList: options.newCertificateCrtList } : {}),
		...(options.newCertificateDirDefault ? { newCertificateDirDefault: true } : {}),
		mode,
		signal,
		now: options.now,
	};
}

/** An endpoint's holds (the trust store's first: a chain it rejects goes nowhere) and the certificates it verifies. */
function rolloutJob(
	trust: ReadonlyMap<string, HeldView>,
	rollout: ReturnType<TargetRollout["forEndpoint"]> | undefined,
	store: TrustStore | undefined,
): { holds?: ReadonlyMap<string, HeldView>; verify?: ReadonlyMap<string, VerifySpec> } {
	const holds = new Map([...(rollout?.holds ?? []), ...trust]);
	// The trust check uses rollout.trust_store, else the target's own.
	const verify = new Map(
		[...(rollout?.verify ?? [])].map(([c, spec]) => [
			c,
			spec.trust || !store ? spec : { ...spec, trust: store },
		]),
	);
	return {
		...(holds.size > 0 ? { holds } : {}),
		...(verify.size > 0 ? { verify } : {}),
	};
}

/**
 * One endpoint's part of the cycle, bounded by the target's endpoint_deadline: at the deadline its work is
 * aborted and the endpoint reported failed (ENDPOINT_DEADLINE) at once, even if something in it does not
 * heed the signal, so a stuck server never holds the other endpoints, targets or the next cycle.
 */
async function withinDeadline(
	options: FleetOptions,
	endpoint: string,
	cycle: AbortSignal,
	run: (signal: AbortSignal) => Promise<EndpointReport>,
): Promise<EndpointReport> {
	const ms = options.endpointDeadlineMs;
	if (ms === undefined) return run(cycle);
	const expiry = new AbortController();
	const signal = AbortSignal.any([cycle, expiry.signal]);
	setMaxListeners(0, signal);
	let timer: NodeJS.Timeout | undefined;
	const expired = new Promise<undefined>((resolve) => {
		timer = setTimeout(() => {
			expiry.abort(new Error(`endpoint_deadline of ${ms} ms passed`));
			resolve(undefined);
		}, ms);
	});
	const overran = () =>
		emptyEndpointReport(
			options.name,
			endpoint,
			{
				code: "ENDPOINT_DEADLINE",
				message: `${endpoint}: its part of the cycle took longer than endpoint_deadline (${formatDuration(ms)}); stopped, tried again next cycle`,
				hint: "the server answers too slowly (see its earlier errors and latency); raise endpoint_deadline if it is only large",
			},
			ms,
		);
	try {
		const work = run(signal);
		// Settles after the abort; its outcome no longer matters.
		work.catch(() => undefined);
		return (await Promise.race([work, expired])) ?? overran();
	} catch (e) {
		if (expiry.signal.aborted && !cycle.aborted) return overran();
		throw e;
	} finally {
		clearTimeout(timer);
	}
}

/** What the endpoint job needs of the memory to decide on a reload. */
function reloadMemory(maxPerHour: number, state: EndpointMemory) {
	return { maxPerHour, history: state.reloads ?? [], ...(state.breaker ? { breaker: state.breaker } : {}) };
}

/** What a sync report leaves to remember of reloads: the last hour's, and the breaker. */
function reloadsToRemember(report: EndpointReport): Pick<EndpointMemory, "reloads" | "breaker"> {
	const r = report.reloads;
	if (r === undefined) return {};
	return {
		...(r.recent.length > 0 ? { reloads: r.recent } : {}),
		...(r.breaker ? { breaker: r.breaker } : {}),
	};
}

function skippedReport(
	target: string,
	endpoint: string,
	consecutive: number,
	skipLeft: number,
): EndpointReport {
	return emptyEndpointReport(target, endpoint, {
		code: "ENDPOINT_UNAVAILABLE",
		message: `${endpoint}: skipped after ${consecutive} failed cycles in a row; tried again in ${skipLeft + 1} cycle(s)`,
		hint: "see the earlier errors for this endpoint",
	});
}
