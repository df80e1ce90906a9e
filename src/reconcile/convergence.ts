/**
 * What "pending" and "converged" mean, defined once: the state of each endpoint and of each certificate on it,
 * decided from the endpoint's report. Every view reads these (CLI, status, /status.json, the fleet page, metrics,
 * /readyz, the daemon's log).
 */
import { endpointFailures, type Failure } from "./failures.js";
import type { RenewalView } from "./model.js";
import {
	type CycleReport,
	type EndpointReport,
	type ReloadsView,
	type StepView,
	stepCounts,
} from "./report.js";
import { type CanonicalVerdict, isCanonical } from "./verdict.js";

/**
 * One endpoint after a cycle: `unobserved` (it did not answer: nothing is known), `failed` (a write, a probe, a
 * shadowed name or a refused update), `pending` (changes planned, skipped or waiting for a reload, none failed),
 * `converged` (every certificate on it in sync and, where probed, served). `reason` says why it is not converged.
 * A certificate on an endpoint has the same four states (`certificateOnEndpoint`), and an endpoint is converged
 * only when every certificate on it is.
 */
export type EndpointState =
	| { state: "converged" }
	| { state: "pending" | "failed" | "unobserved"; reason: string; hint?: string };

/**
 * One certificate on one endpoint: `converged` when its canonical ref holds it in storage and runtime (after this
 * cycle's writes) and every probe by SNI serves it, and nothing about it failed; `failed` when a failure of the
 * endpoint is about it (a write, a refusal, a shadowed name, a probe); `pending` when a write for it is still to
 * run or only a reload makes it live; `unobserved` when the endpoint did not answer. `refInSync`: the canonical ref
 * holds it (a served mismatch aside).
 */
export interface CertificateOnEndpoint {
	state: EndpointState["state"];
	refInSync: boolean;
	/** state === "converged". */
	converged: boolean;
	reason?: string;
	/** Pending with no write to run and no reload held back: only a reload or an operator makes it live. */
	waiting?: true;
}

const absentOf = new WeakMap<CycleReport, RenewalView[]>();

/**
 * Certificates certificatee issues that have none yet (never issued, or none valid). With `target`: only those
 * that target carries (its `certificates` list), which every endpoint of it waits for.
 */
export function absentCertificates(report: CycleReport, target?: string): RenewalView[] {
	// Asked once per endpoint by every view: the report is final once its cycle is over, so decided once.
	let absent = absentOf.get(report);
	if (absent === undefined) {
		const present = new Set(report.certificates.map((c) => c.name));
		absent = (report.renewals ?? []).filter((r) => !present.has(r.certificate));
		absentOf.set(report, absent);
	}
	if (target === undefined || absent.length === 0) return absent;
	const awaiting = report.targets.find((t) => t.target === target)?.awaiting;
	return awaiting === undefined ? absent : absent.filter((r) => awaiting.includes(r.certificate));
}

/**
 * The one verdict on an endpoint. `absent`: the certificates it should carry that do not exist yet
 * (`absentCertificates`): it is not converged while one is missing.
 */
export function endpointState(e: EndpointReport, absent: readonly RenewalView[] = []): EndpointState {
	const index = indexOf(e);
	if (index.state.state !== "converged" || absent.length === 0) return index.state;
	const first = absent[0] as RenewalView;
	const more = absent.length > 1 ? ` (and ${absent.length - 1} more)` : "";
	return { state: "pending", reason: `${first.certificate}: not issued yet (${first.state})${more}` };
}

/**
 * One certificate on one endpoint (see CertificateOnEndpoint); undefined when the endpoint was observed and does
 * not carry the certificate.
 */
export function certificateOnEndpoint(
	e: EndpointReport,
	certificate: string,
): CertificateOnEndpoint | undefined {
	const index = indexOf(e);
	if (!e.ok) {
		return {
			state: "unobserved",
			refInSync: false,
			converged: false,
			reason: `not observed: ${(index.state as { reason: string }).reason}`,
		};
	}
	return index.certificates.get(certificate);
}

/** How many of a target's endpoints that carry the certificate (or were not observed) it has converged on, and why not. */
export function certificateConvergence(
	endpoints: readonly EndpointReport[],
	certificate: string,
): { converged: number; total: number; reasons: string[] } {
	const reasons: string[] = [];
	let converged = 0;
	let total = 0;
	for (const e of endpoints) {
		const c = certificateOnEndpoint(e, certificate);
		if (c === undefined) continue;
		total++;
		if (c.converged) converged++;
		else reasons.push(`${e.endpoint}: ${c.reason}`);
	}
	return { converged, total, reasons };
}

/** Certificates on an observed endpoint pending with no write to run and no reload held: only a reload makes them live. */
export function waitingCertificates(e: EndpointReport): number {
	return e.ok ? indexOf(e).waiting : 0;
}

/**
 * What the per-certificate views read of one endpoint report, decided once per report (the report is final once
 * its cycle is over): without it every certificate scanned every verdict, step and probe of every endpoint,
 * quadratic in the certificates (a second of CPU after each cycle at 5,000 certificates).
 */
interface EndpointIndex {
	failures: Failure[];
	/** Every certificate any verdict names, with its state on the endpoint. */
	certificates: Map<string, CertificateOnEndpoint>;
	/** Certificates pending with no write to run and no reload held: only a reload or an operator makes them live. */
	waiting: number;
	state: EndpointState;
}

const indexes = new WeakMap<EndpointReport, EndpointIndex>();

function indexOf(e: EndpointReport): EndpointIndex {
	const known = indexes.get(e);
	if (known) return known;
	const failures = endpointFailures(e);
	const certificates = e.ok ? certificatesOn(e, failures) : new Map<string, CertificateOnEndpoint>();
	const index: EndpointIndex = {
		failures,
		certificates,
		waiting: [...certificates.values()].filter((c) => c.waiting).length,
		state: decideEndpoint(e, failures, certificates),
	};
	indexes.set(e, index);
	return index;
}

/** The endpoint's own verdict, from its report alone; every certificate's state on it decided once. */
function decideEndpoint(
	e: EndpointReport,
	failures: readonly Failure[],
	certificates: ReadonlyMap<string, CertificateOnEndpoint>,
): EndpointState {
	const first = failures[0];
	const backoff = backoffText(e);
	if (!e.ok) return { state: "unobserved", reason: `${first?.code}: ${first?.message}${backoff}` };
	if (first) {
		const more = failures.length > 1 ? ` (and ${failures.length - 1} more)` : "";
		return {
			state: "failed",
			reason: `${first.code}: ${first.message}${more}${backoff}`,
			...(first.hint ? { hint: first.hint } : {}),
		};
	}
	const pending = stepCounts(e.steps).open;
	const hold = e.held?.[0];
	if (hold)
		return { state: "pending", reason: `${hold.certificate}: ${hold.code}: ${hold.message}${backoff}` };
	if (pending > 0)
		return { state: "pending", reason: `${pending} change${pending === 1 ? "" : "s"} pending${backoff}` };
	const held = e.reloads?.cycle;
	if (held?.decision === "held") return { state: "pending", reason: `${held.code}: ${held.message}` };
	for (const [name, c] of certificates)
		if (c.state !== "converged") return { state: "pending", reason: `${name}: ${c.reason}` };
	return { state: "converged" };
}

/** The remembered backoff of an endpoint plan or status observed anyway. */
function backoffText(e: EndpointReport): string {
	if (e.backoff === undefined) return "";
	const { failures, skipLeft } = e.backoff;
	const sits = skipLeft > 0 ? `sits out the next ${skipLeft} sync cycle(s)` : "tried at the next sync cycle";
	return `; backing off after ${failures} failed cycle(s) in a row: ${sits}`;
}

/** Each certificate any verdict names, with its canonical verdict (the first, where it belongs), if it has one. */
function canonicalVerdicts(e: EndpointReport): Map<string, CanonicalVerdict | undefined> {
	const canonical = new Map<string, CanonicalVerdict | undefined>();
	for (const v of e.verdicts) {
		if (!("certificate" in v) || v.certificate === undefined) continue;
		if (isCanonical(v) && canonical.get(v.certificate) === undefined) canonical.set(v.certificate, v);
		else if (!canonical.has(v.certificate)) canonical.set(v.certificate, undefined);
	}
	return canonical;
}

function groupByRef(steps: readonly StepView[]): Map<string, StepView[]> {
	const byRef = new Map<string, StepView[]>();
	for (const s of steps) {
		const list = byRef.get(s.ref);
		if (list) list.push(s);
		else byRef.set(s.ref, [s]);
	}
	return byRef;
}

/** The endpoint's notes by the ref they are about: a note about a ref starts with "<ref>: ". */
function notesByRef(notes: readonly string[]): Map<string, string> {
	const byRef = new Map<string, string>();
	for (const n of notes) {
		for (let i = n.indexOf(":"); i >= 0; i = n.indexOf(":", i + 1)) {
			const prefix = n.slice(0, i);
			if (!byRef.has(prefix)) byRef.set(prefix, n.slice(i + 1).trim());
		}
	}
	return byRef;
}

/** Each certificate's first failure. */
function firstFailures(failures: readonly Failure[]): Map<string, Failure> {
	const first = new Map<string, Failure>();
	for (const f of failures)
		if (f.certificate !== undefined && !first.has(f.certificate)) first.set(f.certificate, f);
	return first;
}

/** Each certificate the endpoint carries, decided from the endpoint's failures, steps, notes and reloads. */
function certificatesOn(e: EndpointReport, failures: readonly Failure[]): Map<string, CertificateOnEndpoint> {
	const certificates = new Map<string, CertificateOnEndpoint>();
	const stepsByRef = groupByRef(e.steps);
	const openFor = new Set(e.steps.filter((s) => s.result === undefined).flatMap((s) => s.certificate ?? []));
	const notes = notesByRef(e.notes);
	const failed = firstFailures(failures);
	const held = e.reloads?.cycle?.decision === "held" ? e.reloads.cycle : undefined;
	const holds = new Map((e.held ?? []).map((h) => [h.certificate, h]));
	for (const [certificate, verdict] of canonicalVerdicts(e)) {
		if (verdict === undefined) continue;
		const hold = holds.get(certificate);
		if (hold && !failed.has(certificate)) {
			const reason = `${hold.code}: ${hold.message}`;
			certificates.set(certificate, { state: "pending", refInSync: false, converged: false, reason });
			continue;
		}
		certificates.set(
			certificate,
			decideCertificate({
				verdict,
				steps: stepsByRef.get(verdict.ref) ?? [],
				open: openFor.has(certificate),
				note: notes.get(verdict.ref),
				failure: failed.get(certificate),
				held: held?.certificates.includes(certificate) ? held : undefined,
			}),
		);
	}
	return certificates;
}

function decideCertificate(c: {
	verdict: CanonicalVerdict;
	steps: readonly StepView[];
	/** A write for the certificate (on any ref) is still to run. */
	open: boolean;
	/** The plan's note about its ref (e.g. waiting for a reload). */
	note: string | undefined;
	failure: Failure | undefined;
	held: ReloadsView["cycle"] | undefined;
}): CertificateOnEndpoint {
	const { verdict, steps, failure } = c;
	const canonicalFailed = steps.some((s) => s.result === "failed") || verdict.class === "refused";
	const counts = stepCounts(steps);
	const notYet =
		verdict.class !== "in-sync" && (steps.length === 0 || counts.open > 0 || c.note !== undefined);
	const refInSync = !canonicalFailed && !notYet;
	if (failure)
		return { state: "failed", refInSync, converged: false, reason: failure.reason ?? failure.message };
	if (c.held)
		return { state: "pending", refInSync, converged: false, reason: `${c.held.code}: ${c.held.message}` };
	if (notYet || c.open) {
		const open = counts.open > 0 ? `: ${counts.open} change${counts.open === 1 ? "" : "s"} pending` : "";
		const why = c.note !== undefined && counts.open === 0 ? `: ${c.note}` : open;
		return {
			state: "pending",
			refInSync,
			converged: false,
			reason: `${verdict.class}${why || ": changes pending"}`,
			...(c.open ? {} : { waiting: true as const }),
		};
	}
	return { state: "converged", refInSync: true, converged: true };
}
