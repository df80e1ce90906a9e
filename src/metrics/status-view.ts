/**
 * What `status` shows, as data: per certificate and target how many endpoints are converged, plus the
 * duplicates and unmanaged refs found. `status --json` prints the status document; the TTY table and the
 * daemon's fleet page (/ and /status.json) render it. Pure.
 */

import { absentCertificates, certificateConvergence, endpointState } from "../reconcile/convergence.js";
import type { ReplacementView } from "../reconcile/model.js";
import { certificateProblems } from "../reconcile/outcome.js";
import type {
	CycleReport,
	EndpointReport,
	ReloadsView,
	RenewalState,
	RenewalView,
} from "../reconcile/report.js";
import type { RenewalStatus } from "../renewal/status.js";
import type { ClusterView } from "./cluster.js";

export interface TargetConvergence {
	target: string;
	converged: number;
	total: number;
	/** Why each endpoint that is not converged for this certificate is not: "endpoint: reason". */
	reasons: string[];
}

/** One certificate in the status summary: where it stands on each target, with the renewal state it shows. */
export interface CertificateSummary {
	name: string;
	names: string[];
	/** Absent for a certificate never issued. */
	origin?: string;
	serial?: string;
	notBefore?: string;
	notAfter?: string;
	issuer?: string;
	/** The ACME profile it was issued under, when one was ordered. */
	profile?: string;
	/** `source` for certificates from a directory source; the renewal state for issued ones. */
	state: RenewalState | "source";
	/** One line: "backing off until …", "blocked by the daily cap until …", "issued", … */
	stateText: string;
	lastError?: { code: string; message: string; hint?: string };
	/**
	 * Files of its name its source could not use (certificateProblems): an invalid file, or one that expires before
	 * the certificate served. The certificate shown is still the desired one (the last valid, held by the source).
	 */
	problems?: Array<{ code: string; file: string; message: string; hint?: string }>;
	/** An operator's deliberate replacement (`certificatee replace`): who, when, why, and what it replaced. */
	replacement?: ReplacementView;
	/** When certificatee next orders it (ISO). */
	nextAttempt?: string;
	/** Kept for compatibility: the same as nextAttempt. */
	nextRenewal?: string;
	targets: TargetConvergence[];
}

export interface RefView {
	target: string;
	endpoint: string;
	ref: string;
	class: string;
	keeper?: string;
	notAfter?: string;
}

export interface StatusSummary {
	certificates: CertificateSummary[];
	endpoints: Array<{
		target: string;
		endpoint: string;
		up: boolean;
		/** converged, pending, failed or unobserved. */
		state: string;
		/** Why it is not converged. */
		reason?: string;
		error?: string;
		hint?: string;
		/** HAProxy endpoints: the reload budget, the reloads of the last hour and why, the breaker (docs/reloads.md). */
		reloads?: ReloadsView;
	}>;
	duplicates: RefView[];
	unmanaged: RefView[];
}

function stateText(
	state: RenewalState | "source",
	nextAttempt: string | undefined,
	permanent = false,
): string {
	switch (state) {
		case "backing-off":
			return permanent
				? `needs a human; backing off until ${nextAttempt}`
				: `backing off until ${nextAttempt}`;
		case "capped":
			return `blocked by the daily cap until ${nextAttempt}`;
		default:
			return state;
	}
}

const DUPLICATE_CLASSES = new Set([
	"legacy-duplicate",
	"deleted-pending-reload",
	"pinned",
	"ambiguous",
	"unaddressable",
]);

export function statusSummary(report: CycleReport): StatusSummary {
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	// Certificates certificatee issues but has none of (never issued, or none valid): shown with why.
	const waitedFor = absentCertificates(report);
	return {
		certificates: [...desiredSummaries(report), ...waitedFor.map((r) => absentSummary(r, report))],
		endpoints: endpoints.map((e) => endpointSummary(e, absentCertificates(report, e.target))),
		duplicates: refViews(endpoints, (cls) => DUPLICATE_CLASSES.has(cls)),
		unmanaged: refViews(endpoints, (cls) => cls === "unmanaged"),
	};
}

/** The refs whose verdict's class `keep` takes, each with its first observation's expiry. */
function refViews(endpoints: readonly EndpointReport[], keep: (cls: string) => boolean): RefView[] {
	return endpoints.flatMap((e) => {
		let byRef: Map<string, (typeof e.refs)[number]> | undefined;
		return e.verdicts.flatMap((v): RefView[] => {
			if (!("ref" in v) || !keep(v.class)) return [];
			// The first observation of a ref, as a find() over the list would give.
			byRef ??= new Map([...e.refs].reverse().map((r) => [r.ref, r]));
			const observed = byRef.get(v.ref);
			return [
				{
					target: e.target,
					endpoint: e.endpoint,
					ref: v.ref,
					class: v.class,
					...("keeper" in v ? { keeper: v.keeper } : {}),
					...(observed?.notAfter ? { notAfter: observed.notAfter } : {}),
				},
			];
		});
	});
}

/** Each desired certificate: its renewal state (`source` when not issued by certificatee) and convergence. */
function desiredSummaries(report: CycleReport): CertificateSummary[] {
	const renewals = new Map((report.renewals ?? []).map((r) => [r.certificate, r]));
	const problems = certificateProblems(report);
	return report.certificates.map((c): CertificateSummary => {
		const renewal = renewals.get(c.name);
		const state = renewal?.state ?? "source";
		const own = problems.get(c.name) ?? [];
		return {
			...c,
			state,
			stateText: stateText(state, renewal?.nextAttemptAt, renewal?.lastError?.retryable === false),
			...(renewal?.issuer ? { issuer: renewal.issuer } : {}),
			...(renewal?.profile ? { profile: renewal.profile } : {}),
			...(renewal?.lastError ? { lastError: renewal.lastError } : {}),
			...(own.length > 0
				? {
						problems: own.map((f) => ({
							code: f.code,
							file: f.subject,
							message: f.message,
							...(f.hint ? { hint: f.hint } : {}),
						})),
					}
				: {}),
			...(renewal ? { nextAttempt: renewal.nextAttemptAt, nextRenewal: renewal.nextAttemptAt } : {}),
			targets: report.targets.map((t) => ({
				target: t.target,
				...certificateConvergence(t.endpoints, c.name),
			})),
		};
	});
}

/** An issued certificate certificatee has none of yet: on no endpoint of any target. */
function absentSummary(r: RenewalView, report: CycleReport): CertificateSummary {
	return {
		name: r.certificate,
		names: r.names,
		issuer: r.issuer,
		state: r.state,
		stateText: stateText(r.state, r.nextAttemptAt, r.lastError?.retryable === false),
		...(r.lastError ? { lastError: r.lastError } : {}),
		nextAttempt: r.nextAttemptAt,
		nextRenewal: r.nextAttemptAt,
		// A target that does not carry it (its `certificates` list) waits for nothing: 0 of 0, as once issued.
		targets: report.targets.map((t) => {
			const carried = t.awaiting === undefined || t.awaiting.includes(r.certificate);
			return {
				target: t.target,
				converged: 0,
				total: carried ? t.endpoints.length : 0,
				reasons: carried ? t.endpoints.map((e) => `${e.endpoint}: not issued yet`) : [],
			};
		}),
	};
}

function endpointSummary(
	e: EndpointReport,
	waitedFor: readonly RenewalView[],
): StatusSummary["endpoints"][number] {
	const state = endpointState(e, waitedFor);
	const hint = e.error?.hint ?? (state.state === "converged" ? undefined : state.hint);
	return {
		target: e.target,
		endpoint: e.endpoint,
		up: e.ok,
		state: state.state,
		...(state.state !== "converged" ? { reason: state.reason } : {}),
		...(e.error ? { error: e.error.message } : {}),
		...(hint ? { hint } : {}),
		...(e.reloads ? { reloads: e.reloads } : {}),
	};
}

/**
 * The document `status --json` prints and the daemon serves as /status.json: the cycle's report, the renewal
 * status of every issued certificate, and the summary built from them. Free of key material.
 */
export type StatusDocument = Omit<CycleReport, "renewals"> & {
	renewals: RenewalStatus[];
	summary: StatusSummary;
	/** In a cluster (docs/cluster.md): members, the leader, and with sharding who pushes each endpoint. */
	cluster?: ClusterView;
};

export function statusDocument(
	report: CycleReport,
	renewals: RenewalStatus[],
	cluster?: ClusterView,
): StatusDocument {
	return { ...report, renewals, summary: statusSummary(report), ...(cluster ? { cluster } : {}) };
}
