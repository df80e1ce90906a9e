/**
 * What `status` shows, as data: per certificate and target how many endpoints are converged, plus the
 * duplicates and unmanaged refs found. `status --json` prints the status document; the TTY table and the
 * daemon's fleet page (/ and /status.json) render it. Pure.
 */

import { absentCertificates, certificateConvergence, endpointState } from "../reconcile/convergence.js";
import type { ReplacementView } from "../reconcile/model.js";
import { certificateProblems } from "../reconcile/outcome.js";
import type { CycleReport, ReloadsView, RenewalState } from "../reconcile/report.js";
import type { CertificateStatus } from "../renewal/manager.js";
import type { ClusterView } from "./cluster.js";

export interface TargetConvergence {
	target: string;
	converged: number;
	total: number;
	/** Why each endpoint that is not converged for this certificate is not: "endpoint: reason". */
	reasons: string[];
}

export interface CertificateStatusView {
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
	certificates: CertificateStatusView[];
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
	const refs = (keep: (cls: string) => boolean): RefView[] =>
		endpoints.flatMap((e) => {
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
	const renewals = new Map((report.renewals ?? []).map((r) => [r.certificate, r]));
	const targets = (name: string) =>
		report.targets.map((t) => ({ target: t.target, ...certificateConvergence(t.endpoints, name) }));
	const problems = certificateProblems(report);
	const desired = report.certificates.map((c): CertificateStatusView => {
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
			targets: targets(c.name),
		};
	});
	// Certificates certificatee issues but has none of (never issued, or none valid): shown with why.
	const waitedFor = absentCertificates(report);
	const absent = waitedFor.map(
		(r): CertificateStatusView => ({
			name: r.certificate,
			names: r.names,
			issuer: r.issuer,
			state: r.state,
			stateText: stateText(r.state, r.nextAttemptAt, r.lastError?.retryable === false),
			...(r.lastError ? { lastError: r.lastError } : {}),
			nextAttempt: r.nextAttemptAt,
			nextRenewal: r.nextAttemptAt,
			targets: report.targets.map((t) => ({
				target: t.target,
				converged: 0,
				total: t.endpoints.length,
				reasons: t.endpoints.map((e) => `${e.endpoint}: not issued yet`),
			})),
		}),
	);
	return {
		certificates: [...desired, ...absent],
		endpoints: endpoints.map((e) => {
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
		}),
		duplicates: refs((cls) => DUPLICATE_CLASSES.has(cls)),
		unmanaged: refs((cls) => cls === "unmanaged"),
	};
}

/**
 * The document `status --json` prints and the daemon serves as /status.json: the cycle's report, the renewal
 * status of every issued certificate, and the summary built from them. Free of key material.
 */
export type StatusDocument = Omit<CycleReport, "renewals"> & {
	renewals: CertificateStatus[];
	summary: StatusSummary;
	/** In a cluster (docs/cluster.md): members, the leader, and with sharding who pushes each endpoint. */
	cluster?: ClusterView;
};

export function statusDocument(
	report: CycleReport,
	renewals: CertificateStatus[],
	cluster?: ClusterView,
): StatusDocument {
	return { ...report, renewals, summary: statusSummary(report), ...(cluster ? { cluster } : {}) };
}
