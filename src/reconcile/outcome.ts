/**
 * A cycle in one verdict: its failures (its endpoints', failures.ts, and its own: sources, orders, rollouts), what
 * is pending, and the last line `plan` and `sync` print.
 */
import { absentCertificates, endpointState, waitingCertificates } from "./convergence.js";
import { endpointFailures, type Failure, type FailureKind } from "./failures.js";
import type { RenewalState, RenewalView } from "./model.js";
import { type CycleMode, type CycleReport, type SourceProblemView, stepCounts } from "./report.js";

const BLOCKED_RENEWALS: ReadonlySet<RenewalState> = new Set(["failing", "backing-off", "capped"]);

/** Every failure of a cycle: source files, orders (this cycle's and those still blocked), endpoints. */
export function cycleFailures(report: CycleReport): Failure[] {
	const sources = report.sourceProblems.map(sourceFailure);
	const orders = (report.renewals ?? [])
		.filter((r) => r.order?.result === "failed" || BLOCKED_RENEWALS.has(r.state))
		.map(orderFailure);
	const endpoints = report.targets.flatMap((t) => t.endpoints.flatMap(endpointFailures));
	return [...sources, ...orders, ...endpoints, ...haltedRollouts(report, endpoints)];
}

function orderFailure(r: RenewalView): Failure {
	const capped = r.state === "capped";
	return {
		kind: "order",
		key: `order:${r.certificate}`,
		subject: r.certificate,
		certificate: r.certificate,
		code: r.lastError?.code ?? (capped ? "ORDER_CAPPED" : "ISSUE_FAILED"),
		message: capped
			? `${r.certificate}: ${r.message}`
			: `${r.certificate}: ${r.lastError?.message ?? r.message}`,
		hint:
			r.lastError?.hint ??
			(capped
				? `the daily order cap stops ordering until ${r.nextAttemptAt}; find why orders keep failing or being replaced`
				: `next attempt ${r.nextAttemptAt}`),
	};
}

/** A halted rollout fails the cycle even where no canary ran in it (plan, or another member's canary). */
function haltedRollouts(report: CycleReport, endpoints: readonly Failure[]): Failure[] {
	return (report.rollouts ?? [])
		.filter(
			(r) =>
				r.stage === "halted" &&
				!endpoints.some((f) => f.kind === "rollout" && f.certificate === r.certificate),
		)
		.map((r): Failure => {
			const f = r.failure;
			return {
				kind: "rollout",
				key: `rollout:${r.certificate}`,
				subject: r.certificate,
				certificate: r.certificate,
				...(f ? { endpoint: f.endpoint } : {}),
				code: f?.code ?? "ROLLOUT_HALTED",
				message: `rollout of ${r.certificate} (serial ${r.serial}) halted${f ? `: ${f.check} check failed on canary ${f.endpoint}: ${f.message}` : ""}`,
				hint: f?.hint ?? "a new version of the certificate starts the rollout again",
			};
		});
}

/**
 * The source problems of each certificate, by name: the files of its name that could not be used (invalid, or expiring
 * before the one served). Its last valid certificate may still be the desired one (held by its source), so a
 * certificate can be converged everywhere and still need a human: every view lists these beside it.
 */
export function certificateProblems(report: CycleReport): Map<string, Failure[]> {
	const out = new Map<string, Failure[]>();
	for (const p of report.sourceProblems) {
		if (p.certificate === undefined) continue;
		const list = out.get(p.certificate);
		if (list) list.push(sourceFailure(p));
		else out.set(p.certificate, [sourceFailure(p)]);
	}
	return out;
}

function sourceFailure(p: SourceProblemView): Failure {
	return {
		kind: "source",
		key: `source:${p.subject}:${p.code}`,
		subject: p.subject,
		...(p.certificate ? { certificate: p.certificate } : {}),
		code: p.code,
		message: p.message,
		hint: p.hint ?? "fix or remove the file; the source's other certificates are still used",
	};
}

export interface CycleOutcome {
	failures: Failure[];
	/**
	 * Writes planned or skipped, reloads held back, certificates waiting on an endpoint for what this cycle
	 * cannot do (a reload), plus certificates due to be ordered.
	 */
	pending: number;
	/** Writes done this cycle. */
	written: number;
	endpoints: number;
	/** Endpoints observed, nothing failed, nothing pending, every certificate on them converged (endpointState). */
	convergedEndpoints: number;
	/** Targets none of whose endpoints could be observed. */
	unobservedTargets: string[];
	/** Every endpoint observed and in sync, nothing pending, nothing failed. */
	converged: boolean;
}

export function cycleOutcome(report: CycleReport): CycleOutcome {
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	const failures = cycleFailures(report);
	const writes = stepCounts(endpoints.flatMap((e) => e.steps));
	// A reload held back (budget, max_per_hour 0) leaves what it would make live not served: pending.
	const held = endpoints.filter((e) => e.reloads?.cycle?.decision === "held").length;
	const waiting = endpoints.reduce((n, e) => n + waitingCertificates(e), 0);
	const due = (report.renewals ?? []).filter((r) => r.state === "due").length;
	const pending = writes.open + held + waiting + due;
	const convergedEndpoints = endpoints.filter(
		(e) => endpointState(e, absentCertificates(report, e.target)).state === "converged",
	).length;
	return {
		failures,
		pending,
		written: writes.done,
		endpoints: endpoints.length,
		convergedEndpoints,
		unobservedTargets: report.targets
			.filter((t) => t.endpoints.length > 0 && t.endpoints.every((e) => !e.ok))
			.map((t) => t.target),
		converged: failures.length === 0 && pending === 0 && convergedEndpoints === endpoints.length,
	};
}

/** How the last line counts failures of each kind: one, many. */
const FAILURE_NOUNS: Record<FailureKind, [string, string]> = {
	source: ["source problem", "source problems"],
	order: ["failed order", "failed orders"],
	endpoint: ["endpoint unreachable", "endpoints unreachable"],
	write: ["failed write", "failed writes"],
	probe: ["failed probe", "failed probes"],
	shadowed: ["shadowed name", "shadowed names"],
	refused: ["refused update", "refused updates"],
	reload: ["reload breaker open", "reload breakers open"],
	"crt-list": ["crt-list line naming a missing file", "crt-list lines naming missing files"],
	trust: ["chain not trusted", "chains not trusted"],
	rollout: ["rollout halted", "rollouts halted"],
};

/** The last line of `plan` and `sync`: "converged" only when every endpoint was observed and is in sync. */
export function outcomeLine(outcome: CycleOutcome, mode: CycleMode): string {
	if (outcome.converged)
		return outcome.written === 0
			? "converged: nothing to do"
			: `converged: ${outcome.written} write${outcome.written === 1 ? "" : "s"} done`;
	const parts: string[] = [];
	const byKind = new Map<FailureKind, number>();
	for (const f of outcome.failures) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
	for (const [kind, n] of byKind) parts.push(`${n} ${FAILURE_NOUNS[kind][n === 1 ? 0 : 1]}`);
	if (outcome.pending > 0) {
		parts.push(`${outcome.pending} ${mode === "plan" ? "pending" : "not done"}`);
	}
	return `not converged: ${parts.join(", ")} (${outcome.convergedEndpoints}/${outcome.endpoints} endpoints converged)`;
}
