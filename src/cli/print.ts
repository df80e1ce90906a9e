/** Human renderings of a cycle report: the plan (and the lines the status screen shares with it), the cluster. */
import type { ClusterView } from "../metrics/cluster.js";
import { endpointFailures } from "../reconcile/failures.js";
import { cycleOutcome, outcomeLine } from "../reconcile/outcome.js";
import type { ReloadsView } from "../reconcile/report.js";
import { type CycleReport, type EndpointReport, type RenewalView, stepCounts } from "../reconcile/report.js";
import type { Verdict } from "../reconcile/verdict.js";
import { renderTable, type Styler } from "./table.js";

export function verdictLine(v: Verdict): string {
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

export const hint = (h: string | undefined): string => (h ? ` (hint: ${h})` : "");

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

export function renderEndpointPlan(e: EndpointReport, style: Styler): string[] {
	if (e.error) {
		return [
			`  ${e.endpoint}: ${style.paint({ text: `skipped: ${e.error.code}: ${e.error.message}`, colour: "red" })}`,
		];
	}
	return [
		`  ${e.endpoint}: ${planHead(e, style)}`,
		...e.steps.map((s) => stepLine(s, style)),
		...noteLines(e, style),
		...reloadLines(e, style),
		...attentionLines(e, style),
	];
}

/** "in sync", the changes a plan would make, or what a sync wrote and did not. */
function planHead(e: EndpointReport, style: Styler): string {
	const counts = stepCounts(e.steps);
	const failed = counts.failed + counts.skipped;
	if (e.steps.length === 0) return style.paint({ text: "in sync", colour: "green" });
	if (e.steps[0]?.result === undefined) return `${e.steps.length} change(s)`;
	return style.paint({
		text: `${e.steps.length - failed} written, ${failed} failed or skipped`,
		colour: failed > 0 ? "red" : "green",
	});
}

function stepLine(s: EndpointReport["steps"][number], style: Styler): string {
	const result = s.result
		? ` [${s.result}${s.error ? `: ${s.error.message}${s.error.hint ? ` (hint: ${s.error.hint})` : ""}` : ""}]`
		: "";
	return `    ${style.paint({ text: s.op, colour: s.op.includes("delete") || s.op.includes("remove") ? "yellow" : "cyan" })} ${s.ref}${s.serial ? ` serial ${s.serial}` : ""}${s.crtList ? ` in ${s.crtList}` : ""}: ${s.why}${result}`;
}

/** Certificates held back, what is served after the writes, and the verdicts and notes worth a line. */
function noteLines(e: EndpointReport, style: Styler): string[] {
	const out: string[] = [];
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
	return out;
}

/** This cycle's reload decision, and the reload breaker when it is open. */
function reloadLines(e: EndpointReport, style: Styler): string[] {
	const out: string[] = [];
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
	return out;
}

/** What frees a shadowed name (once per culprit), and each name not served as desired. */
function attentionLines(e: EndpointReport, style: Styler): string[] {
	const fixes = new Set(
		endpointFailures(e).flatMap((f) => (f.kind === "shadowed" && f.hint ? [f.hint] : [])),
	);
	const out = [...fixes].map((fix) => `    ${style.paint({ text: "to fix", colour: "red" })} ${fix}`);
	for (const s of e.served.filter((x) => !x.match)) {
		out.push(
			`    ${style.paint({ text: "served", colour: "red" })} ${s.sni}: ${s.servedSerial ?? s.error} (want ${s.expectedSerial})`,
		);
	}
	return out;
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
