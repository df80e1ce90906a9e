/**
 * The page's sections, each from the status document alone: certificates with their timelines, targets with
 * their endpoints, duplicates, reloads and source problems. Every value goes through `html` (escaped).
 */
import type { CertificateSummary, StatusDocument } from "../status-view.js";
import { type Html, html } from "./escape.js";
import { type BudgetFact, budgetFacts, reloadFacts, removedRefs, targetFacts } from "./facts.js";
import { roughDuration, timelineSvg } from "./timeline.js";

const ok = (converged: number, total: number) =>
	total === 0 ? "none" : converged === total ? "good" : "bad";

function stat(key: string, label: string, value: string | number, tone?: string): Html {
	return html`<div class="stat ${tone}"><span class="value" data-stat="${key}">${value}</span><span class="label">${label}</span></div>`;
}

export function overview(doc: StatusDocument): Html {
	const endpoints = doc.summary.endpoints;
	const converged = endpoints.filter((e) => e.state === "converged").length;
	const failing = endpoints.filter((e) => e.state === "failed" || e.state === "unobserved").length;
	const budgets = budgetFacts(doc);
	return html`<section class="overview" aria-label="overview">${[
		stat("certificates", "certificates", doc.summary.certificates.length),
		stat(
			"endpoints",
			"endpoints converged",
			`${converged}/${endpoints.length}`,
			ok(converged, endpoints.length),
		),
		stat("failing", "endpoints failing", failing, failing > 0 ? "bad" : "good"),
		stat("duplicates", "duplicates found", doc.summary.duplicates.length),
		stat("removed", "duplicates removed", removedRefs(doc).length),
		stat("reloads", "reloads caused", reloadFacts(doc).length),
		budgets.length > 0 &&
			stat(
				"reloads-hour",
				"reloads in the last hour",
				budgets.reduce((n, b) => n + b.recent.length, 0),
			),
	]}</section>`;
}

function expiry(c: CertificateSummary, now: Date): Html {
	if (c.notBefore === undefined || c.notAfter === undefined)
		return html`<span class="muted">not issued</span>`;
	const notAfter = new Date(c.notAfter);
	const left = notAfter.getTime() - now.getTime();
	const renewAt = c.nextRenewal ? new Date(c.nextRenewal) : undefined;
	return html`${timelineSvg({
		notBefore: new Date(c.notBefore),
		notAfter,
		now,
		...(renewAt ? { renewAt } : {}),
	})}<div class="small">${left > 0 ? `expires in ${roughDuration(left)}` : `expired ${roughDuration(left)} ago`}${
		renewAt
			? ` · renews ${renewAt > now ? `in ${roughDuration(renewAt.getTime() - now.getTime())}` : "now"}`
			: ""
	}</div>`;
}

function certificateRow(c: CertificateSummary, now: Date): Html {
	const error = c.lastError
		? html`<div class="error">${c.lastError.code}: ${c.lastError.message}${c.lastError.hint ? html`<div class="hint">${c.lastError.hint}</div>` : ""}</div>`
		: "";
	// A file of its name its source could not use: the certificate shown is the last valid one, still served.
	const problems = (c.problems ?? []).map(
		(p) =>
			html`<div class="error" data-problem="${p.code}">${p.code}: ${p.message}${p.hint ? html`<div class="hint">${p.hint}</div>` : ""}</div>`,
	);
	const replaced = c.replacement
		? html`<div class="small" data-replacement>deliberate replacement by ${c.replacement.by} at ${c.replacement.requestedAt}: ${c.replacement.reason}</div>`
		: "";
	const cells = c.targets.map(
		(t) =>
			html`<td class="conv ${ok(t.converged, t.total)}" data-cert="${c.name}" data-target="${t.target}" title="${t.reasons.join("\n")}">${t.converged}/${t.total}</td>`,
	);
	return html`<tr data-certificate="${c.name}"><th scope="row">${c.name}<div class="small muted">${c.names.join(", ")}</div></th><td>${c.origin ?? html`<span class="muted">—</span>`}${c.issuer ? html`<div class="small muted">issuer ${c.issuer}</div>` : ""}</td><td class="state ${c.state}">${c.stateText}${error}${problems}${replaced}</td><td>${expiry(c, now)}</td>${cells}</tr>`;
}

export function certificatesSection(doc: StatusDocument, now: Date): Html {
	const targets = doc.targets.map((t) => t.target);
	const certificates = doc.summary.certificates;
	const reasons = certificates.flatMap((c) =>
		c.targets.flatMap((t) => t.reasons.map((r) => html`<li>${c.name} on ${t.target}/${r}</li>`)),
	);
	return html`<section id="certificates"><h2>Certificates</h2>${
		certificates.length === 0
			? html`<p class="muted">No certificates: check the sources.</p>`
			: html`<div class="scroll"><table><thead><tr><th>certificate</th><th>from</th><th>state</th><th>expiry <span class="legend"><span class="key now"></span>now <span class="key renew"></span>renewal</span></th>${targets.map((t) => html`<th class="conv">${t}</th>`)}</tr></thead><tbody>${certificates.map((c) => certificateRow(c, now))}</tbody></table></div>`
	}${reasons.length > 0 ? html`<details><summary>Why not converged (${reasons.length})</summary><ul class="reasons">${reasons}</ul></details>` : ""}</section>`;
}

export function targetsSection(doc: StatusDocument): Html {
	const facts = targetFacts(doc);
	return html`<section id="targets"><h2>Targets</h2>${facts.map((t) => {
		const endpoints = doc.summary.endpoints.filter((e) => e.target === t.target);
		const rows = endpoints.map((e) => {
			const reason = e.reason ?? "";
			// An endpoint that did not answer has its error as its reason (convergence.ts): said once.
			const error = e.up ? e.error : undefined;
			return html`<tr data-endpoint="${e.endpoint}" data-target="${e.target}"><th scope="row">${e.endpoint}</th><td class="state ${e.state}">${e.state}</td><td><span class="${e.up ? "" : "error"}">${reason}</span>${error ? html`<div class="error">last error: ${error}</div>` : ""}${e.hint ? html`<div class="hint">${e.hint}</div>` : ""}</td></tr>`;
		});
		return html`<div class="target" data-target="${t.target}"><h3>${t.target} <span class="muted small">${t.kind}</span> <span class="conv ${ok(t.converged, t.total)}" data-target-converged="${t.target}">${t.converged}/${t.total}</span> <span class="small muted">endpoints converged</span></h3><table class="endpoints"><tbody>${rows}</tbody></table></div>`;
	})}</section>`;
}

export function duplicatesSection(doc: StatusDocument): Html {
	const found = doc.summary.duplicates.map(
		(d) =>
			html`<tr data-duplicate="${d.ref}"><td>${d.target}/${d.endpoint}</td><td>${d.ref}</td><td>${d.class}</td><td>${d.keeper ?? ""}</td></tr>`,
	);
	const removed = removedRefs(doc).map(
		(r) =>
			html`<li data-removed="${r.ref}">${r.ref} <span class="muted">on ${r.target}/${r.endpoint}</span></li>`,
	);
	return html`<section id="duplicates"><h2>Duplicates</h2>${
		found.length === 0
			? html`<p class="muted">None found in the last cycle.</p>`
			: html`<table><thead><tr><th>endpoint</th><th>ref</th><th>class</th><th>keeper</th></tr></thead><tbody>${found}</tbody></table>`
	}${removed.length > 0 ? html`<p>Removed in the last cycle:</p><ul>${removed}</ul>` : ""}</section>`;
}

function budgetText(b: BudgetFact["budget"]): string {
	if (b.maxPerHour === 0) return "0 per hour: reloads are reported, never done";
	const next = b.remaining === 0 && b.nextAt ? `; next at ${b.nextAt}` : "";
	return `${b.used} of ${b.maxPerHour} used in the last hour, ${b.remaining} left${next}`;
}

function budgetRow(b: BudgetFact): Html {
	const cycle = b.cycle
		? html`<div class="${b.cycle.decision === "held" || (b.cycle.result && b.cycle.result !== "ok") ? "hint" : ""}">this cycle: ${b.cycle.decision}${b.cycle.result ? ` (${b.cycle.result})` : ""} for ${b.cycle.reasons.join(", ")}${b.cycle.code ? `: ${b.cycle.code}` : ""}: ${b.cycle.message}</div>`
		: "";
	const recent = b.recent.map((r) => html`<li>${r.at}: ${r.reasons.join(", ")} → ${r.result}</li>`);
	return html`<tr data-budget="${b.endpoint}"><th scope="row">${b.target}/${b.endpoint}</th><td>${budgetText(b.budget)}${cycle}${recent.length > 0 ? html`<ul class="small">${recent}</ul>` : ""}</td><td>${
		b.breaker
			? html`<span class="error">breaker open since ${b.breaker.openedAt}: ${b.breaker.code}: ${b.breaker.message}</span>`
			: html`<span class="good">breaker closed</span>`
	}</td></tr>`;
}

export function reloadsSection(doc: StatusDocument): Html {
	const reloads = reloadFacts(doc).map(
		(r) =>
			html`<li>${r.target}/${r.endpoint}: ${r.op} ${r.ref}: ${r.reason}${r.reloadId ? ` (reload ${r.reloadId})` : ""}</li>`,
	);
	const budgets = budgetFacts(doc);
	return html`<section id="reloads"><h2>Reloads</h2>${
		reloads.length === 0
			? html`<p class="muted">No reload caused by a write in the last cycle.</p>`
			: html`<p>Caused by writes in the last cycle:</p><ul>${reloads}</ul>`
	}${budgets.length > 0 ? html`<h3>Reload budget</h3><table class="endpoints"><tbody>${budgets.map(budgetRow)}</tbody></table>` : ""}</section>`;
}

export function problemsSection(doc: StatusDocument): Html {
	if (doc.sourceProblems.length === 0) return html``;
	return html`<section id="problems"><h2>Source problems</h2><ul>${doc.sourceProblems.map(
		(p) =>
			html`<li><span class="error">${p.subject}: ${p.code}: ${p.message}</span>${p.hint ? html`<div class="hint">${p.hint}</div>` : ""}</li>`,
	)}</ul></section>`;
}
