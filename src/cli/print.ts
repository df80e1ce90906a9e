/** Human renderings of a cycle report: the plan and the status screen. The data is the report itself. */
import { formatDuration } from "../config/duration.js";
import type { Verdict } from "../reconcile/classify.js";
import type { CycleReport, EndpointReport } from "../reconcile/report.js";
import { type RenewalInfo, statusSummary } from "./status-view.js";
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
	}
}

export function renderPlan(report: CycleReport, style: Styler): string[] {
	const out: string[] = [];
	for (const p of report.sourceProblems) {
		out.push(style.paint({ text: `source problem: ${p.message}`, colour: "yellow" }));
	}
	for (const t of report.targets) {
		out.push(style.paint({ text: `target ${t.target} (${t.kind})`, colour: "bold" }));
		for (const e of t.endpoints) out.push(...renderEndpointPlan(e, style));
	}
	const steps = report.targets.flatMap((t) => t.endpoints).flatMap((e) => e.steps);
	if (steps.length === 0) out.push("converged: nothing to do");
	else if (report.mode === "plan") out.push(`${steps.length} change${steps.length === 1 ? "" : "s"} pending`);
	else {
		const done = steps.filter((s) => s.result === "ok").length;
		out.push(`${done} write${done === 1 ? "" : "s"} done, ${steps.length - done} failed or skipped`);
	}
	return out;
}

function renderEndpointPlan(e: EndpointReport, style: Styler): string[] {
	const out: string[] = [];
	if (e.error) {
		out.push(
			`  ${e.endpoint}: ${style.paint({ text: `skipped: ${e.error.code}: ${e.error.message}`, colour: "red" })}`,
		);
		return out;
	}
	const failed = e.steps.filter((s) => s.result !== undefined && s.result !== "ok").length;
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
	if (e.servingAfter && e.servingAfter.length > 0) {
		const served = e.servingAfter.map((s) => `${s.sni} -> ${s.ref}`).join(", ");
		out.push(`    ${style.paint({ text: "serving after the writes", colour: "dim" })} ${served}`);
	}
	for (const v of e.verdicts) {
		if (v.class === "in-sync" || v.class === "stale" || v.class === "missing") continue;
		out.push(`    ${style.paint({ text: "note", colour: "dim" })} ${verdictLine(v)}`);
	}
	for (const n of e.notes) out.push(`    ${style.paint({ text: "note", colour: "dim" })} ${n}`);
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
	renewals?: RenewalInfo;
}

function expiresIn(notAfter: string, now: Date): Cell {
	const ms = Date.parse(notAfter) - now.getTime();
	return {
		text: ms <= 0 ? "EXPIRED" : formatDuration(ms),
		colour: ms <= 0 ? "red" : ms < 7 * 86_400_000 ? "yellow" : "green",
	};
}

export function renderStatus(report: CycleReport, style: Styler, options: StatusOptions): string[] {
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	const targetNames = report.targets.map((t) => t.target);
	const rows = statusSummary(report, options.renewals).certificates.map((c) => [
		c.name,
		c.names.join(","),
		c.origin,
		expiresIn(c.notAfter, options.now),
		c.nextRenewal ? formatDuration(Date.parse(c.nextRenewal) - options.now.getTime()) : "-",
		...c.targets.map(
			(t): Cell => ({
				text: `${t.converged}/${t.total}`,
				colour: t.converged === t.total ? "green" : "red",
			}),
		),
	]);
	const out = renderTable(
		["CERTIFICATE", "NAMES", "FROM", "EXPIRES IN", "RENEWS IN", ...targetNames],
		rows,
		style,
	);
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
	const down = endpoints.filter((e) => !e.ok);
	for (const e of down)
		out.push(style.paint({ text: `${e.target}/${e.endpoint} down: ${e.error?.message}`, colour: "red" }));
	for (const p of report.sourceProblems)
		out.push(style.paint({ text: `source problem: ${p.message}`, colour: "yellow" }));
	return out;
}
