/** Human renderings of a cycle report: the plan and the status screen. The data is the report itself. */
import { formatDuration } from "../base/duration.js";
import type { ClusterView } from "../metrics/cluster.js";
import { type StatusSummary, statusSummary } from "../metrics/status-view.js";
import { absentCertificates, endpointState } from "../reconcile/convergence.js";
import { endpointFailures } from "../reconcile/failures.js";
import { cycleOutcome, outcomeLine } from "../reconcile/outcome.js";
import type { ReloadsView } from "../reconcile/report.js";
import { type CycleReport, type EndpointReport, type RenewalView, stepCounts } from "../reconcile/report.js";
import type { Verdict } from "../reconcile/verdict.js";
import { type Cell, renderTable, type Styler } from "./table.js";

function verdictLine(v: Verdict): string {
	switch (v.class) {
		case "in-sync":
		case "missing":
			return `${v.ref}: ${v.class} (${v.certificate})`;
		case "stale":
			return `${v.ref}: stale in ${[...v.sides, ...v.missingSides].join(" and ")} (${v.certificate})`;
		case "refused":
			return `${v.ref}: refused: ${v.why}`;
		case "legacy-duplicate":
			return `${v.ref}: legacy duplicate of ${v.keeper}${v.keeperStable ? "" : ` (keeper not stable yet${v.keeperUnstable ? `: ${v.keeperUnstable}` : ""}; kept current)`}`;
		case "deleted-pending-reload":
			return `${v.ref}: duplicate of ${v.keeper}, gone from storage, still in runtime`;
		case "pinned":
			return `${v.ref}: pinned duplicate of ${v.keeper}: ${v.why}`;
		case "ambiguous":
			return `${v.ref}: ambiguous (${v.certificates.join(", ")}): ${v.why}; left alone`;
		case "shadowed":
			return `${v.sni}: shadowed: ${v.why}`;
		case "unmanaged":
			return `${v.ref}: unmanaged${v.notAfter ? `, expires ${v.notAfter.toISOString()}` : ""}; never touched`;
		case "unaddressable":
			return `${v.ref}: unaddressable: ${v.why}`;
	}
}

export function renderPlan(report: CycleReport, style: Styler): string[] {
	const out: string[] = [];
	for (const p of report.sourceProblems) {
		out.push(style.paint({ text: `source problem: ${p.message}${hint(p.hint)}`, colour: "yellow" }));
	}
	for (const r of report.renewals ?? []) {
		const line = orderLine(r, report.mode);
		if (line) out.push(style.paint({ text: line, colour: r.state === "due" ? "cyan" : "red" }));
	}
	out.push(...rolloutLines(report, style));
	for (const t of report.targets) {
		out.push(style.paint({ text: `target ${t.target} (${t.kind})`, colour: "bold" }));
		for (const e of t.endpoints) out.push(...renderEndpointPlan(e, style));
	}
	const steps = report.targets.flatMap((t) => t.endpoints).flatMap((e) => e.steps);
	if (steps.length > 0 && report.mode === "plan") {
		out.push(`${steps.length} change${steps.length === 1 ? "" : "s"} pending`);
	} else if (steps.length > 0) {
		const { done, open } = stepCounts(steps);
		out.push(`${done} write${done === 1 ? "" : "s"} done, ${open} failed or skipped`);
	}
	const outcome = cycleOutcome(report);
	out.push(
		style.paint({ text: outcomeLine(outcome, report.mode), colour: outcome.converged ? "green" : "red" }),
	);
	return out;
}

const hint = (h: string | undefined) => (h ? ` (hint: ${h})` : "");

/** Each rollout's stages in order, the current one marked: what plan, sync and status show of it. */
export function rolloutLines(report: CycleReport, style: Styler): string[] {
	const out: string[] = [];
	for (const r of report.rollouts ?? []) {
		const mark = (stage: string) => (stage === r.stage ? " <- now" : "");
		const verified = r.verified.length > 0 ? `, verified on ${r.verified.join(", ")}` : "";
		const colour = r.stage === "halted" ? "red" : r.stage === "rest" ? "green" : "cyan";
		out.push(style.paint({ text: `rollout ${r.certificate} (serial ${r.serial}): ${r.stage}`, colour }));
		out.push(
			`  1. canary: ${r.canaries.join(", ")}${r.stage === "canary" || r.stage === "halted" ? " <- now" : ""}${verified}`,
		);
		out.push(`  2. hold${r.holdUntil ? ` until ${r.holdUntil}` : ""}${mark("hold")}`);
		out.push(`  3. rest: ${r.rest.join(", ") || "(none)"}${mark("rest")}`);
		if (r.failure)
			out.push(
				style.paint({
					text: `  halted: ${r.failure.code} on ${r.failure.endpoint} (${r.failure.check}): ${r.failure.message}${hint(r.failure.hint)}`,
					colour: "red",
				}),
			);
	}
	return out;
}

/** A line for a certificate the cycle ordered, would order, or cannot order; none when it is simply issued. */
function orderLine(r: RenewalView, mode: "plan" | "sync"): string | undefined {
	const error = r.lastError ? `${r.lastError.code}: ${r.lastError.message}${hint(r.lastError.hint)}` : "";
	if (r.order?.result === "ok") return undefined;
	if (r.order?.result === "failed") return `order ${r.certificate} from ${r.issuer} failed: ${error}`;
	switch (r.state) {
		case "due":
			return mode === "plan" ? `order ${r.certificate} from ${r.issuer}: ${r.message}` : undefined;
		case "failing":
			return `order ${r.certificate} from ${r.issuer} failing: ${error || r.message}`;
		case "backing-off":
			return `order ${r.certificate} from ${r.issuer} ${r.lastError?.retryable === false ? "needs a human; " : ""}backing off until ${r.nextAttemptAt}: ${error}`;
		case "capped":
			return `order ${r.certificate} from ${r.issuer} blocked by the daily cap until ${r.nextAttemptAt}: ${r.message}`;
		default:
			return undefined;
	}
}

function renderEndpointPlan(e: EndpointReport, style: Styler): string[] {
	const out: string[] = [];
	if (e.error) {
		out.push(
			`  ${e.endpoint}: ${style.paint({ text: `skipped: ${e.error.code}: ${e.error.message}`, colour: "red" })}`,
		);
		return out;
	}
	const counts = stepCounts(e.steps);
	const failed = counts.failed + counts.skipped;
	const head =
		e.steps.length === 0
			? style.paint({ text: "in sync", colour: "green" })
			: e.steps[0]?.result === undefined
				? `${e.steps.length} change(s)`
				: style.paint({
						text: `${e.steps.length - failed} written, ${failed} failed or skipped`,
						colour: failed > 0 ? "red" : "green",
					});
	out.push(`  ${e.endpoint}: ${head}`);
	for (const s of e.steps) {
		const result = s.result
			? ` [${s.result}${s.error ? `: ${s.error.message}${s.error.hint ? ` (hint: ${s.error.hint})` : ""}` : ""}]`
			: "";
		out.push(
			`    ${style.paint({ text: s.op, colour: s.op.includes("delete") || s.op.includes("remove") ? "yellow" : "cyan" })} ${s.ref}${s.serial ? ` serial ${s.serial}` : ""}${s.crtList ? ` in ${s.crtList}` : ""}: ${s.why}${result}`,
		);
	}
	for (const h of e.held ?? [])
		out.push(
			`    ${style.paint({ text: "held", colour: h.failed ? "red" : "yellow" })} ${h.certificate}: ${h.code}: ${h.message}`,
		);
	if (e.servingAfter && e.servingAfter.length > 0) {
		const served = e.servingAfter.map((s) => `${s.sni} -> ${s.ref}`).join(", ");
		out.push(`    ${style.paint({ text: "serving after the writes", colour: "dim" })} ${served}`);
	}
	for (const v of e.verdicts) {
		if (v.class === "in-sync" || v.class === "stale" || v.class === "missing") continue;
		out.push(`    ${style.paint({ text: "note", colour: "dim" })} ${verdictLine(v)}`);
	}
	for (const n of e.notes) out.push(`    ${style.paint({ text: "note", colour: "dim" })} ${n}`);
	const cycle = e.reloads?.cycle;
	if (cycle) {
		const ok = cycle.decision === "reloaded" && cycle.result === "ok";
		const text = cycle.decision === "held" ? `held ${cycle.code}` : `reloaded: ${cycle.result}`;
		out.push(
			`    ${style.paint({ text: "reload", colour: ok ? "cyan" : cycle.decision === "held" ? "yellow" : "red" })} ${text}: ${cycle.message}`,
		);
	}
	if (e.reloads?.breaker) {
		out.push(
			`    ${style.paint({ text: "reload breaker open", colour: "red" })} ${e.reloads.breaker.message}`,
		);
	}
	// A shadowed name says what frees it, once per culprit.
	const fixes = new Set(
		endpointFailures(e).flatMap((f) => (f.kind === "shadowed" && f.hint ? [f.hint] : [])),
	);
	for (const fix of fixes) out.push(`    ${style.paint({ text: "to fix", colour: "red" })} ${fix}`);
	for (const s of e.served.filter((x) => !x.match)) {
		out.push(
			`    ${style.paint({ text: "served", colour: "red" })} ${s.sni}: ${s.servedSerial ?? s.error} (want ${s.expectedSerial})`,
		);
	}
	return out;
}

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
	const targetNames = report.targets.map((t) => t.target);
	const summary: StatusSummary = statusSummary(report);
	// An endpoint that is down is said once, below, not again for each certificate it should carry.
	const down = new Set(
		endpoints
			.filter((e) => endpointState(e).state === "unobserved")
			.map((e) => `${e.target}/${e.endpoint}: `),
	);
	const rows = summary.certificates.map((c) => [
		c.name,
		c.names.join(","),
		c.origin ? `${shortOrigin(c.origin)}${c.profile ? ` (${c.profile})` : ""}` : "not issued",
		expiresIn(c.notAfter, options.now),
		c.nextAttempt ? formatDuration(Math.max(0, Date.parse(c.nextAttempt) - options.now.getTime())) : "-",
		{ text: c.state, colour: STATE_COLOUR[c.state] },
		...c.targets.map(
			(t): Cell => ({
				text: `${t.converged}/${t.total}`,
				colour: t.converged === t.total ? "green" : "red",
			}),
		),
	]);
	const out = renderTable(
		["CERTIFICATE", "NAMES", "FROM", "EXPIRES IN", "RENEWS IN", "STATE", ...targetNames],
		rows,
		style,
	);
	// Why: each certificate that needs attention, then each cell that is not converged.
	const why: string[] = [];
	for (const c of summary.certificates) {
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
				if (![...down].some((d) => `${t.target}/${r}`.startsWith(d)))
					why.push(`${c.name} on ${t.target}/${r}`);
	}
	if (why.length > 0) out.push("", ...why);
	const detail = endpoints.filter((e) => options.endpoint === undefined || e.endpoint === options.endpoint);
	const extra = detail.flatMap((e) =>
		e.verdicts
			.filter((v) => !(v.class === "in-sync" || v.class === "stale" || v.class === "missing"))
			.map((v) => [e.target, e.endpoint, v.class, verdictLine(v)]),
	);
	if (options.endpoint !== undefined) {
		out.push("");
		for (const e of detail) out.push(...renderEndpointPlan(e, style));
	} else if (extra.length > 0) {
		out.push("");
		out.push(...renderTable(["TARGET", "ENDPOINT", "CLASS", "DETAIL"], extra, style));
	}
	const absent = absentCertificates(report);
	for (const e of endpoints) {
		const state = endpointState(e, absent);
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
	for (const e of summary.endpoints) {
		const line = reloadsLine(e.reloads);
		if (line)
			out.push(
				style.paint({
					text: `${e.target}/${e.endpoint} reloads: ${line}`,
					colour: line.includes("breaker OPEN") ? "red" : undefined,
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

/** "1 of 2 left this hour; done: 12:01:00Z too-large ok; breaker OPEN since …: …"; undefined when nothing to say. */
export function reloadsLine(r: ReloadsView | undefined): string | undefined {
	if (r === undefined || (r.budget.maxPerHour === 0 && r.recent.length === 0 && !r.breaker)) return undefined;
	const { budget } = r;
	const parts = [
		budget.maxPerHour === 0
			? "never (reloads.max_per_hour: 0)"
			: `${budget.remaining} of ${budget.maxPerHour} left this hour${budget.nextAt ? ` (next allowed at ${budget.nextAt})` : ""}`,
	];
	if (r.recent.length > 0) {
		parts.push(`done: ${r.recent.map((x) => `${x.at} ${x.reasons.join("+")} ${x.result}`).join(", ")}`);
	}
	if (r.breaker) parts.push(`breaker OPEN since ${r.breaker.openedAt}: ${r.breaker.message}`);
	return parts.join("; ");
}

/** `status` in a cluster: who leads, who is alive, and with sharding who pushes each endpoint. */
export function renderCluster(view: ClusterView, style: Styler): string[] {
	const leader = view.leader ?? "none (an election is under way, or etcd cannot be read)";
	const out = [
		"",
		style.paint({ text: "CLUSTER", colour: "bold" }),
		`leader: ${leader}`,
		`members (${view.members.length}): ${view.members.join(", ") || "none registered"}${view.shardEndpoints ? "" : " (registered only with shard_endpoints)"}`,
		view.shardEndpoints
			? "endpoints: sharded over the live members"
			: "endpoints: every member pushes every endpoint",
	];
	if (view.owners && view.owners.length > 0) {
		out.push(
			...renderTable(
				["TARGET", "ENDPOINT", "PUSHED BY"],
				view.owners.map((o) => [
					o.target,
					o.endpoint,
					o.owner ? o.owner : { text: "nobody (no live member)", colour: "red" },
				]),
				style,
			),
		);
	}
	return out;
}
