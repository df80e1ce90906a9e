/** The status screen: a table of certificates, why any needs attention, and each endpoint that is not converged. */
import { formatDuration } from "../base/duration.js";
import { type StatusSummary, statusSummary } from "../metrics/status-view.js";
import { absentCertificates, endpointState } from "../reconcile/convergence.js";
import type { CycleReport, EndpointReport } from "../reconcile/report.js";
import { hint, reloadsLine, renderEndpointPlan, rolloutLines, verdictLine } from "./print.js";
import { type Cell, renderTable, type Styler } from "./table.js";

export interface StatusOptions {
	now: Date;
	endpoint?: string;
}

function expiresIn(notAfter: string | undefined, now: Date): Cell {
	if (notAfter === undefined) return { text: "-", colour: "red" };
	const ms = Date.parse(notAfter) - now.getTime();
	return {
		text: ms <= 0 ? "EXPIRED" : formatDuration(ms),
		colour: ms <= 0 ? "red" : ms < 7 * 86_400_000 ? "yellow" : "green",
	};
}

const STATE_COLOUR = {
	issued: "green",
	source: "green",
	due: "cyan",
	ordering: "cyan",
	failing: "red",
	"backing-off": "red",
	capped: "red",
} as const;

export function renderStatus(full: CycleReport, style: Styler, options: StatusOptions): string[] {
	// --endpoint NAME: every part of the view is about that endpoint alone (its target's column counts it only).
	const report = options.endpoint === undefined ? full : onlyEndpoint(full, options.endpoint);
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	const summary: StatusSummary = statusSummary(report);
	// An endpoint that is down is said once, below, not again for each certificate it should carry.
	const down = new Set(
		endpoints
			.filter((e) => endpointState(e).state === "unobserved")
			.map((e) => `${e.target}/${e.endpoint}: `),
	);
	const out = certificateTable(report, summary, style, options.now);
	// Why: each certificate that needs attention, then each cell that is not converged.
	const why = summary.certificates.flatMap((c) => certificateWhy(c, down, style));
	if (why.length > 0) out.push("", ...why);
	out.push(...endpointDetail(endpoints, style, options.endpoint));
	out.push(...endpointStateLines(report, endpoints, style));
	for (const e of summary.endpoints) {
		const line = reloadsLine(e.reloads);
		if (line)
			out.push(
				style.paint({
					text: `${e.target}/${e.endpoint} reloads: ${line}`,
					colour: e.reloads?.breaker ? "red" : undefined,
				}),
			);
	}
	// A problem of a certificate in the table is said beside it, above.
	const shown = new Set(summary.certificates.map((c) => c.name));
	for (const p of report.sourceProblems)
		if (p.certificate === undefined || !shown.has(p.certificate))
			out.push(style.paint({ text: `source problem: ${p.message}${hint(p.hint)}`, colour: "yellow" }));
	const rollouts = rolloutLines(report, style);
	if (rollouts.length > 0) out.push("", ...rollouts);
	return out;
}

type CertificateSummary = StatusSummary["certificates"][number];

/** One row per certificate: where it comes from, when it expires and renews, its state, per target converged/total. */
function certificateTable(report: CycleReport, summary: StatusSummary, style: Styler, now: Date): string[] {
	const rows = summary.certificates.map((c) => [
		c.name,
		c.names.join(","),
		c.origin ? `${shortOrigin(c.origin)}${c.profile ? ` (${c.profile})` : ""}` : "not issued",
		expiresIn(c.notAfter, now),
		c.nextAttempt ? formatDuration(Math.max(0, Date.parse(c.nextAttempt) - now.getTime())) : "-",
		{ text: c.state, colour: STATE_COLOUR[c.state] },
		...c.targets.map(
			(t): Cell => ({
				text: `${t.converged}/${t.total}`,
				colour: t.converged === t.total ? "green" : "red",
			}),
		),
	]);
	return renderTable(
		[
			"CERTIFICATE",
			"NAMES",
			"FROM",
			"EXPIRES IN",
			"RENEWS IN",
			"STATE",
			...report.targets.map((t) => t.target),
		],
		rows,
		style,
	);
}

/** Why a certificate needs attention: its state, a deliberate replacement, its source problems, its cells. */
function certificateWhy(c: CertificateSummary, down: ReadonlySet<string>, style: Styler): string[] {
	const why: string[] = [];
	if (c.state !== "issued" && c.state !== "source") {
		why.push(style.paint({ text: `${c.name}: ${c.stateText}`, colour: STATE_COLOUR[c.state] }));
		if (c.lastError) why.push(`  last error ${c.lastError.code}: ${c.lastError.message}`);
		if (c.lastError?.hint) why.push(`  hint: ${c.lastError.hint}`);
		if (c.nextAttempt) why.push(`  next attempt ${c.nextAttempt}`);
	}
	if (c.replacement) {
		const was = c.replacement.replaces
			? ` of serial ${c.replacement.replaces.serial} (expires ${c.replacement.replaces.notAfter})`
			: "";
		why.push(
			style.paint({
				text: `${c.name}: deliberate replacement${was} by ${c.replacement.by} at ${c.replacement.requestedAt}: ${c.replacement.reason}`,
				colour: "cyan",
			}),
		);
	}
	for (const p of c.problems ?? []) {
		why.push(style.paint({ text: `${c.name}: ${p.code}: ${p.message}`, colour: "yellow" }));
		if (p.hint) why.push(`  hint: ${p.hint}`);
	}
	for (const t of c.targets)
		for (const r of t.reasons)
			if (![...down].some((d) => `${t.target}/${r}`.startsWith(d))) why.push(`${c.name} on ${t.target}/${r}`);
	return why;
}

/** With --endpoint, that endpoint's plan view; else a table of the verdicts worth a line. */
function endpointDetail(
	endpoints: readonly EndpointReport[],
	style: Styler,
	endpoint: string | undefined,
): string[] {
	const detail = endpoints.filter((e) => endpoint === undefined || e.endpoint === endpoint);
	if (endpoint !== undefined) return ["", ...detail.flatMap((e) => renderEndpointPlan(e, style))];
	const extra = detail.flatMap((e) =>
		e.verdicts
			.filter((v) => !(v.class === "in-sync" || v.class === "stale" || v.class === "missing"))
			.map((v) => [e.target, e.endpoint, v.class, verdictLine(v)]),
	);
	return extra.length > 0
		? ["", ...renderTable(["TARGET", "ENDPOINT", "CLASS", "DETAIL"], extra, style)]
		: [];
}

/** A line per endpoint that is not converged: down, pending or failed, with the reason and hint. */
function endpointStateLines(
	report: CycleReport,
	endpoints: readonly EndpointReport[],
	style: Styler,
): string[] {
	const out: string[] = [];
	for (const e of endpoints) {
		const state = endpointState(e, absentCertificates(report, e.target));
		if (state.state === "converged") continue;
		const word = state.state === "unobserved" ? "down" : state.state;
		const colour = state.state === "pending" ? "yellow" : "red";
		out.push(
			style.paint({
				text: `${e.target}/${e.endpoint} ${word}: ${state.reason}${hint(state.hint ?? e.error?.hint)}`,
				colour,
			}),
		);
	}
	return out;
}

/** The report with only the endpoint named NAME (and the targets that have it). */
function onlyEndpoint(report: CycleReport, name: string): CycleReport {
	const targets = report.targets
		.map((t) => ({ ...t, endpoints: t.endpoints.filter((e) => e.endpoint === name) }))
		.filter((t) => t.endpoints.length > 0);
	return { ...report, targets };
}

/**
 * Where a certificate comes from, as wide as the table can afford: a source file by its source and file name
 * ("files: a.pem", not the full path), an issued one by its issuer (its serial is in the detail and --json).
 */
export function shortOrigin(origin: string): string {
	const file = /^source ([^:]+): (.+)$/.exec(origin);
	if (file)
		return `${file[1]}: ${file[2]
			?.split(" + ")
			.map((f) => f.split("/").at(-1))
			.join(" + ")}`;
	const issued = /^issuer ([^:]+): /.exec(origin);
	return issued ? `issuer ${issued[1]}` : origin;
}
