/**
 * What `status` shows, as data: per certificate and target how many endpoints are converged, plus the
 * duplicates and unmanaged refs found. `status --json` prints it; the TTY table renders it. Pure.
 */
import type { CycleReport, EndpointReport } from "../reconcile/report.js";

export interface TargetConvergence {
	target: string;
	converged: number;
	total: number;
}

export interface CertificateStatusView {
	name: string;
	names: string[];
	origin: string;
	serial: string;
	notAfter: string;
	issuer?: string;
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
	endpoints: Array<{ target: string; endpoint: string; up: boolean; error?: string }>;
	duplicates: RefView[];
	unmanaged: RefView[];
}

export type RenewalInfo = ReadonlyMap<string, { nextRenewal?: Date; issuer?: string }>;

/** An endpoint is converged for a certificate when it holds it in sync and every probe serves it. */
function convergence(endpoints: readonly EndpointReport[], certificate: string) {
	const eps = endpoints.filter(
		(e) => e.verdicts.some((v) => "certificate" in v && v.certificate === certificate) || !e.ok,
	);
	const converged = eps.filter(
		(e) =>
			e.ok &&
			e.verdicts.some((v) => v.class === "in-sync" && v.certificate === certificate) &&
			e.served.filter((s) => s.certificate === certificate).every((s) => s.match),
	).length;
	return { converged, total: eps.length };
}

const DUPLICATE_CLASSES = new Set([
	"legacy-duplicate",
	"deleted-pending-reload",
	"pinned",
	"ambiguous",
	"unaddressable",
]);

export function statusSummary(report: CycleReport, renewals?: RenewalInfo): StatusSummary {
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	const refs = (keep: (cls: string) => boolean): RefView[] =>
		endpoints.flatMap((e) =>
			e.verdicts.flatMap((v): RefView[] => {
				if (!("ref" in v) || !keep(v.class)) return [];
				const observed = e.refs.find((r) => r.ref === v.ref);
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
			}),
		);
	return {
		certificates: report.certificates.map((c) => {
			const renewal = renewals?.get(c.name);
			return {
				...c,
				...(renewal?.issuer ? { issuer: renewal.issuer } : {}),
				...(renewal?.nextRenewal ? { nextRenewal: renewal.nextRenewal.toISOString() } : {}),
				targets: report.targets.map((t) => ({ target: t.target, ...convergence(t.endpoints, c.name) })),
			};
		}),
		endpoints: endpoints.map((e) => ({
			target: e.target,
			endpoint: e.endpoint,
			up: e.ok,
			...(e.error ? { error: e.error.message } : {}),
		})),
		duplicates: refs((cls) => DUPLICATE_CLASSES.has(cls)),
		unmanaged: refs((cls) => cls === "unmanaged"),
	};
}
