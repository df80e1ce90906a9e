/**
 * One cycle, top to bottom: desired certificates from the sources, then every target (per endpoint:
 * observe → classify → plan → apply in sync mode), then the report. `plan` and `sync` share it.
 */
import { setMaxListeners } from "node:events";
import pLimit from "p-limit";
import type { DesiredCertificate, DesiredSet } from "./model.js";
import type { CycleMode, CycleReport, EndpointReport, TargetReport } from "./report.js";
import type { RolloutCoordinator, TargetRollout } from "./rollout.js";

/** A configured target. run() never throws for an endpoint's failure: it is in the report. */
export interface TargetRunner {
	readonly name: string;
	readonly kind: string;
	/** HAProxy targets: every endpoint's name in configuration order (a rollout spans them, owned or not). */
	readonly endpoints?: readonly string[];
	/** Whether the target receives the certificate (its `certificates` list). */
	carries?(certificate: string): boolean;
	/**
	 * `onEndpoint` is called as each endpoint finishes (progress on large fleets). `awaiting`: certificates this
	 * target carries that certificatee issues and has none of yet (pending on every endpoint, never a failure).
	 */
	run(
		desired: readonly DesiredCertificate[],
		mode: CycleMode,
		signal: AbortSignal,
		onEndpoint?: (report: EndpointReport) => void,
		rollout?: TargetRollout,
		awaiting?: readonly string[],
	): Promise<TargetReport>;
}

export interface CycleDeps {
	loadDesired(signal: AbortSignal): Promise<DesiredSet>;
	targets: readonly TargetRunner[];
	now(): Date;
	/** Called as each endpoint finishes, for progress. */
	onEndpoint?(report: EndpointReport): void;
	/** Targets run at once (each bounds its own endpoints). */
	targetConcurrency?: number;
	/** The configured `rollout`: canaries first, the rest after they verified and the hold (reconcile/rollout.ts). */
	rollout?: RolloutCoordinator;
}

export async function runCycle(deps: CycleDeps, mode: CycleMode, caller: AbortSignal): Promise<CycleReport> {
	// Every probe, request and wait of the cycle listens on its signal, many at once (8 probes per endpoint, on
	// every target in parallel): the cycle's own signal, following the caller's, has no listener limit, so Node
	// never writes a MaxListenersExceededWarning into the JSON log.
	const signal = AbortSignal.any([caller]);
	setMaxListeners(0, signal);
	const started = deps.now();
	const desired = await deps.loadDesired(signal);
	const limit = pLimit(deps.targetConcurrency ?? 4);
	const rollouts = await deps.rollout?.begin(
		desired.certificates,
		deps.targets.flatMap((t) =>
			t.endpoints
				? [{ name: t.name, endpoints: t.endpoints, carries: (c: string) => t.carries?.(c) ?? true }]
				: [],
		),
		mode,
	);
	// Issued certificates with none yet (never issued, or none valid): each target waits for those it carries.
	const present = new Set(desired.certificates.map((c) => c.name));
	const absent = (desired.renewals ?? []).map((r) => r.certificate).filter((c) => !present.has(c));
	const targets = await Promise.all(
		deps.targets.map((t) =>
			limit(async () => {
				const awaiting = absent.filter((c) => t.carries?.(c) ?? true);
				const rollout = rollouts?.forTarget(t.name);
				const report = await t.run(desired.certificates, mode, signal, deps.onEndpoint, rollout, awaiting);
				return absent.length > 0 ? { ...report, awaiting } : report;
			}),
		),
	);
	const report: CycleReport = {
		mode,
		startedAt: started.toISOString(),
		durationMs: deps.now().getTime() - started.getTime(),
		certificates: desired.certificates.map((c) => ({
			name: c.name,
			names: c.names,
			origin: c.origin,
			serial: c.bundle.leaf.serial,
			notBefore: c.bundle.leaf.notBefore.toISOString(),
			notAfter: c.bundle.leaf.notAfter.toISOString(),
			...(c.replacement ? { replacement: c.replacement } : {}),
		})),
		// A failed order is reported with its certificate's renewal, not as a source problem.
		sourceProblems: desired.problems
			.filter((p) => !(p.order && desired.renewals))
			.map((p) => ({
				subject: p.subject,
				...(p.certificate ? { certificate: p.certificate } : {}),
				code: p.error.code,
				message: p.error.message,
				...(p.error.hint ? { hint: p.error.hint } : {}),
			})),
		...(desired.renewals ? { renewals: desired.renewals } : {}),
		targets,
	};
	if (deps.rollout && rollouts) report.rollouts = await deps.rollout.finish(rollouts, report, mode);
	return report;
}

/** The certificates a target receives: all, or those its config lists. */
export function selectCertificates(
	desired: readonly DesiredCertificate[],
	only: readonly string[] | undefined,
): DesiredCertificate[] {
	return only === undefined ? [...desired] : desired.filter((d) => only.includes(d.name));
}
