/** What a cycle found and did: JSON-safe, free of key material. `plan --json` prints it unchanged. */
import type { ErrorView } from "../errors.js";
import type { AuditEvent } from "./audit.js";
import type { RefusalCode, Verdict } from "./classify.js";
import type { Action, ActionOp, RenewalState, RenewalView } from "./model.js";
import type { BreakerState, BudgetView, ReloadReason, ReloadRecord } from "./reload-budget.js";
import type { ServingAfter } from "./serving.js";

export type { RenewalState, RenewalView } from "./model.js";

/** An action as shown in plans and reports: never the bundle, only its identity. */
export interface StepView {
	op: ActionOp;
	ref: string;
	certificate?: string;
	/** Serial of the certificate being written. */
	serial?: string;
	crtList?: string;
	why: string;
	/** Absent in a plan; set once applied. */
	result?: "ok" | "failed" | "skipped";
	error?: ErrorView;
	note?: string;
	reloadCaused?: { reloadId?: string; reason: string };
	/** Written to disk; only a reload makes it live. */
	reloadNeeded?: ReloadReason;
}

/** An endpoint's reloads: the budget, the reloads of the last hour and why, this cycle's decision, the breaker. */
export interface ReloadsView {
	budget: BudgetView;
	/** Reloads in the last hour (oldest first). */
	recent: ReloadRecord[];
	/** This cycle: a reload done (ok, failed, not-served), or held with the code and why. */
	cycle?: {
		decision: "reloaded" | "held";
		reasons: ReloadReason[];
		/** The certificates the reload is for (their names are not served until it happens). */
		certificates: string[];
		code?: string;
		message: string;
		result?: ReloadRecord["result"];
	};
	breaker?: BreakerState;
}

export interface ServedView {
	sni: string;
	certificate: string;
	expectedSerial: string;
	servedSerial?: string;
	match: boolean;
	error?: string;
	/**
	 * The listener answered and refused this name's handshake with a TLS alert: it holds no certificate for the
	 * name (and key type) yet. A write that deploys one fixes it; an unreachable probe address is not this.
	 */
	noCertificate?: true;
}

export interface EndpointReport {
	target: string;
	endpoint: string;
	ok: boolean;
	error?: ErrorView;
	verdicts: Verdict[];
	steps: StepView[];
	notes: string[];
	/** Which ref serves each name of every certificate written at runtime, once the writes ran (as planned). */
	servingAfter?: ServingAfter[];
	served: ServedView[];
	/** Refs observed, with expiry and class, for metrics (unmanaged ones too). */
	refs: Array<{ ref: string; class: Verdict["class"]; notAfter?: string }>;
	durationMs: number;
	/** The endpoint failed this many sync cycles in a row and sync sits out `skipLeft` more (remembered). */
	backoff?: { failures: number; skipLeft: number };
	/** HAProxy endpoints: the reload budget, reloads done and why, and the breaker. */
	reloads?: ReloadsView;
	/** sync: every write and removal done, and every served change a probe saw (audit.ts); logged one per line. */
	audit?: AuditEvent[];
}

export interface TargetReport {
	target: string;
	kind: string;
	endpoints: EndpointReport[];
}

export interface CycleReport {
	mode: "plan" | "sync";
	startedAt: string;
	durationMs: number;
	certificates: Array<{
		name: string;
		names: string[];
		origin: string;
		serial: string;
		notBefore: string;
		notAfter: string;
	}>;
	sourceProblems: Array<{ subject: string; code: string; message: string; hint?: string }>;
	/** Certificates certificatee issues: where each stands after the cycle (absent in reports built by hand). */
	renewals?: RenewalView[];
	targets: TargetReport[];
}

export function viewAction(action: Action, why: string): StepView {
	const base: StepView = { op: action.op, ref: action.ref, why };
	if ("certificate" in action) {
		base.certificate = action.certificate;
		if ("bundle" in action) base.serial = action.bundle.leaf.serial;
	}
	if ("crtList" in action) base.crtList = action.crtList;
	return base;
}

/** An endpoint report with nothing found or done yet: `ok`, unless `error` says why the endpoint was not reached. */
export function emptyEndpointReport(
	target: string,
	endpoint: string,
	error?: ErrorView,
	durationMs = 0,
): EndpointReport {
	return {
		target,
		endpoint,
		ok: error === undefined,
		...(error ? { error } : {}),
		verdicts: [],
		steps: [],
		notes: [],
		served: [],
		refs: [],
		durationMs,
	};
}

/* ---------------------------------------------------------------------------------------------------------
 * What "failed", "pending" and "converged" mean, defined once. The CLI's exit codes and last line, the
 * daemon's logs, /readyz and the metrics all read these.
 * ------------------------------------------------------------------------------------------------------- */

export type FailureKind = "source" | "order" | "endpoint" | "write" | "probe" | "refused" | "reload";

/** Where a list of steps stands: `open` ones are not done (planned, skipped or failed). */
export interface StepCounts {
	total: number;
	done: number;
	failed: number;
	skipped: number;
	open: number;
}

export function stepCounts(steps: readonly StepView[]): StepCounts {
	const count = (result: StepView["result"]) => steps.filter((s) => s.result === result).length;
	const done = count("ok");
	return {
		total: steps.length,
		done,
		failed: count("failed"),
		skipped: count("skipped"),
		open: steps.length - done,
	};
}

/** One thing that went wrong, with what an operator needs to act on it. Never key material. */
export interface Failure {
	kind: FailureKind;
	/** Stable identity across cycles (for "log once on change"). */
	key: string;
	/** What it is about: a file, a certificate, target/endpoint. */
	subject: string;
	target?: string;
	endpoint?: string;
	certificate?: string;
	code: string;
	message: string;
	hint?: string;
}

/**
 * One endpoint after a cycle: `unobserved` (it did not answer: nothing is known), `failed` (a write, a probe or a
 * refused update), `pending` (changes planned or skipped, none failed), `converged` (everything in sync and,
 * where probed, served). `reason` says why it is not converged.
 */
export type EndpointState =
	| { state: "converged" }
	| { state: "pending" | "failed" | "unobserved"; reason: string };

/** What to do, when the error itself carries no hint. */
const DEFAULT_HINT = {
	source: "fix or remove the file; the source's other certificates are still used",
	endpoint:
		"check that the endpoint is up and reachable from certificatee (address, socket path, credentials)",
	write: "see the endpoint's log; the write is retried next cycle",
} as const;

const REFUSAL_HINT: Record<RefusalCode, string> = {
	UPDATE_DROPS_NAMES:
		"check the new certificate's names; set allow_name_removal: true on the target to push it anyway",
	UPDATE_WOULD_DOWNGRADE:
		"a certificate that expires later is live on this ref (another member or an operator pushed it): a member whose store lags catches up by itself; if the live one is wrong, replace it by hand (docs/cluster.md, Never downgrade)",
	MANAGED_BY_HAPROXY_ACME:
		"one ACME client per certificate: drop it from certificatee's configuration, or the acme keyword from HAProxy's load line (docs/layouts.md)",
	PLACEMENT_UNKNOWN:
		"tell certificatee where HAProxy loads it from (crt_stores.<store>.crt_base / key_base; docs/haproxy-runtime-target.md)",
};

const BLOCKED_RENEWALS: ReadonlySet<RenewalState> = new Set(["failing", "backing-off", "capped"]);

/** Every failure of an endpoint, in the order an operator would fix them. */
export function endpointFailures(e: EndpointReport): Failure[] {
	const at = `${e.target}/${e.endpoint}`;
	const base = { target: e.target, endpoint: e.endpoint };
	if (!e.ok) {
		const err = e.error ?? { code: "ENDPOINT_ERROR", message: "the endpoint did not answer" };
		return [
			{ kind: "endpoint", key: `endpoint:${at}`, subject: at, ...base, hint: DEFAULT_HINT.endpoint, ...err },
		];
	}
	const out: Failure[] = [];
	for (const s of e.steps) {
		if (s.result !== "failed") continue;
		out.push({
			kind: "write",
			key: `write:${at}:${s.ref}:${s.op}`,
			subject: `${at} ${s.op} ${s.ref}`,
			...base,
			...(s.certificate ? { certificate: s.certificate } : {}),
			hint: DEFAULT_HINT.write,
			...(s.error ?? { code: "ENDPOINT_ERROR", message: "the write failed" }),
		});
	}
	for (const v of e.verdicts) {
		if (v.class !== "refused") continue;
		out.push({
			kind: "refused",
			key: `refused:${at}:${v.ref}`,
			subject: `${at} ${v.ref}`,
			...base,
			certificate: v.certificate,
			code: v.code,
			message: `${v.ref}: ${v.why}`,
			hint: REFUSAL_HINT[v.code],
		});
	}
	const breaker = e.reloads?.breaker;
	if (breaker) {
		const failedNow = e.reloads?.cycle?.decision === "reloaded" && e.reloads.cycle.result !== "ok";
		out.push({
			kind: "reload",
			key: `reload:${at}`,
			subject: at,
			...base,
			code: failedNow ? "RELOAD_FAILED" : "RELOAD_BREAKER_OPEN",
			message: `${at}: reload breaker open since ${breaker.openedAt}: ${breaker.message}; no writes to this endpoint`,
			hint: "fix HAProxy (haproxy -c, its log) until it serves what was written: the breaker closes by itself at the next cycle whose probes all match; or clear it (docs/reloads.md)",
		});
	}
	// A mismatch a planned write will fix is pending, not failed; after the writes (sync) it is a failure.
	const fixing = new Set(e.steps.filter((s) => s.result === undefined).map((s) => s.certificate));
	// A name waiting for a reload held back (budget, max_per_hour 0) is pending, reported with the reload's reason.
	if (e.reloads?.cycle?.decision === "held") for (const c of e.reloads.cycle.certificates) fixing.add(c);
	for (const s of e.served) {
		// A probe HAProxy refuses for want of a certificate is fixed by the write that deploys one, as a mismatch is.
		if (s.match || ((s.error === undefined || s.noCertificate) && fixing.has(s.certificate))) continue;
		out.push({
			kind: "probe",
			key: `probe:${at}:${s.sni}`,
			subject: `${at} ${s.sni}`,
			...base,
			certificate: s.certificate,
			code: "PROBE_FAILED",
			message: s.error
				? `probe of ${s.sni}: ${s.error}`
				: `${s.sni} serves serial ${s.servedSerial ?? "?"}, want ${s.expectedSerial}`,
			hint: s.error
				? "check the endpoint's probe address (host:port of the TLS listener)"
				: "another ref wins this SNI name: see the endpoint's notes (shadowed, ambiguous, pinned)",
		});
	}
	return out;
}

export function endpointState(e: EndpointReport): EndpointState {
	const failures = endpointFailures(e);
	const first = failures[0];
	const backoff = backoffText(e);
	if (!e.ok) return { state: "unobserved", reason: `${first?.code}: ${first?.message}${backoff}` };
	if (first) {
		const more = failures.length > 1 ? ` (and ${failures.length - 1} more)` : "";
		return { state: "failed", reason: `${first.code}: ${first.message}${more}${backoff}` };
	}
	const pending = stepCounts(e.steps).open;
	if (pending > 0)
		return { state: "pending", reason: `${pending} change${pending === 1 ? "" : "s"} pending${backoff}` };
	const held = e.reloads?.cycle;
	if (held?.decision === "held") return { state: "pending", reason: `${held.code}: ${held.message}` };
	return { state: "converged" };
}

/** The remembered backoff of an endpoint plan or status observed anyway. */
function backoffText(e: EndpointReport): string {
	if (e.backoff === undefined) return "";
	const { failures, skipLeft } = e.backoff;
	const sits = skipLeft > 0 ? `sits out the next ${skipLeft} sync cycle(s)` : "tried at the next sync cycle";
	return `; backing off after ${failures} failed cycle(s) in a row: ${sits}`;
}

const CANONICAL: ReadonlySet<string> = new Set(["in-sync", "stale", "missing", "refused"]);

/**
 * One certificate on one endpoint: `refInSync` when its canonical ref holds it in storage and runtime (after
 * this cycle's writes); `converged` when moreover every probe by SNI serves it; `reason` when not converged.
 * Undefined when the endpoint was observed and does not carry the certificate.
 */
/**
 * What the per-certificate views read of one endpoint report, looked up once per report (the report is final
 * once its cycle is over): without it every certificate scanned every verdict, step and probe of every endpoint,
 * quadratic in the certificates (a second of CPU after each cycle at 5,000 certificates).
 */
interface EndpointIndex {
	state: EndpointState;
	/** The canonical verdict of each certificate (the first, as find() gave). */
	canonical: Map<string, Verdict>;
	/** Certificates any verdict names. */
	carried: Set<string>;
	steps: Map<string, StepView[]>;
	/** Every prefix a note has before one of its ":" (a note about a ref starts with "<ref>:"). */
	notePrefixes: Set<string>;
	/** The first probe of each certificate that did not match. */
	mismatch: Map<string, EndpointReport["served"][number]>;
}

const indexes = new WeakMap<EndpointReport, EndpointIndex>();

function indexOf(e: EndpointReport): EndpointIndex {
	let index = indexes.get(e);
	if (index) return index;
	index = {
		state: endpointState(e),
		canonical: new Map(),
		carried: new Set(),
		steps: new Map(),
		notePrefixes: new Set(),
		mismatch: new Map(),
	};
	for (const v of e.verdicts) {
		if (!("certificate" in v) || v.certificate === undefined) continue;
		index.carried.add(v.certificate);
		if (CANONICAL.has(v.class) && !index.canonical.has(v.certificate)) index.canonical.set(v.certificate, v);
	}
	for (const s of e.steps) {
		const list = index.steps.get(s.ref);
		if (list) list.push(s);
		else index.steps.set(s.ref, [s]);
	}
	for (const n of e.notes)
		for (let i = n.indexOf(":"); i >= 0; i = n.indexOf(":", i + 1)) index.notePrefixes.add(n.slice(0, i));
	for (const probe of e.served)
		if (!probe.match && !index.mismatch.has(probe.certificate)) index.mismatch.set(probe.certificate, probe);
	indexes.set(e, index);
	return index;
}

export function certificateOnEndpoint(
	e: EndpointReport,
	certificate: string,
): { refInSync: boolean; converged: boolean; reason?: string } | undefined {
	const index = indexOf(e);
	const state = index.state;
	if (state.state === "unobserved") {
		return { refInSync: false, converged: false, reason: `not observed: ${state.reason}` };
	}
	const verdict = index.canonical.get(certificate);
	if (verdict === undefined || !("ref" in verdict)) return undefined;
	const not = (reason: string) => ({ refInSync: false, converged: false, reason });
	if (verdict.class === "refused") return not(`refused: ${verdict.why}`);
	const steps = index.steps.get(verdict.ref) ?? [];
	const failed = steps.find((s) => s.result === "failed");
	if (failed) return not(`${failed.op} failed: ${failed.error?.code}: ${failed.error?.message}`);
	if (verdict.class !== "in-sync") {
		const open = stepCounts(steps).open;
		const noted = index.notePrefixes.has(verdict.ref);
		if (steps.length === 0 || open > 0 || noted) {
			return not(`${verdict.class}${open > 0 ? `: ${open} change${open === 1 ? "" : "s"} pending` : ""}`);
		}
	}
	const probe = index.mismatch.get(certificate);
	if (probe) {
		return {
			refInSync: true,
			converged: false,
			reason: probe.error
				? `probe of ${probe.sni} failed: ${probe.error}`
				: `${probe.sni} serves serial ${probe.servedSerial}, want ${probe.expectedSerial}`,
		};
	}
	return { refInSync: true, converged: true };
}

/** How many of a target's endpoints that carry the certificate (or were not observed) it has converged on, and why not. */
export function certificateConvergence(
	endpoints: readonly EndpointReport[],
	certificate: string,
): { converged: number; total: number; reasons: string[] } {
	const eps = endpoints.filter((e) => !e.ok || indexOf(e).carried.has(certificate));
	const reasons: string[] = [];
	let converged = 0;
	for (const e of eps) {
		const c = certificateOnEndpoint(e, certificate);
		if (c === undefined || c.converged) converged++;
		else reasons.push(`${e.endpoint}: ${c.reason}`);
	}
	return { converged, total: eps.length, reasons };
}

/** Every failure of a cycle: source files, orders (this cycle's and those still blocked), endpoints. */
export function cycleFailures(report: CycleReport): Failure[] {
	const sources = report.sourceProblems.map(
		(p): Failure => ({
			kind: "source",
			key: `source:${p.subject}:${p.code}`,
			subject: p.subject,
			code: p.code,
			message: p.message,
			hint: p.hint ?? DEFAULT_HINT.source,
		}),
	);
	const orders = (report.renewals ?? [])
		.filter((r) => r.order?.result === "failed" || BLOCKED_RENEWALS.has(r.state))
		.map(
			(r): Failure => ({
				kind: "order",
				key: `order:${r.certificate}`,
				subject: r.certificate,
				certificate: r.certificate,
				code: r.lastError?.code ?? (r.state === "capped" ? "ORDER_CAPPED" : "ISSUE_FAILED"),
				message:
					r.state === "capped"
						? `${r.certificate}: ${r.message}`
						: `${r.certificate}: ${r.lastError?.message ?? r.message}`,
				hint:
					r.lastError?.hint ??
					(r.state === "capped"
						? `the daily order cap stops ordering until ${r.nextAttemptAt}; find why orders keep failing or being replaced`
						: `next attempt ${r.nextAttemptAt}`),
			}),
		);
	return [...sources, ...orders, ...report.targets.flatMap((t) => t.endpoints.flatMap(endpointFailures))];
}

export interface CycleOutcome {
	failures: Failure[];
	/** Writes planned or skipped, plus certificates due to be ordered. */
	pending: number;
	endpoints: number;
	/** Endpoints observed, nothing failed, nothing pending. */
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
	const pending = writes.open + held + (report.renewals ?? []).filter((r) => r.state === "due").length;
	const convergedEndpoints = endpoints.filter((e) => endpointState(e).state === "converged").length;
	return {
		failures,
		pending,
		endpoints: endpoints.length,
		convergedEndpoints,
		unobservedTargets: report.targets
			.filter((t) => t.endpoints.length > 0 && t.endpoints.every((e) => !e.ok))
			.map((t) => t.target),
		converged: failures.length === 0 && pending === 0 && convergedEndpoints === endpoints.length,
	};
}

/** The last line of `plan` and `sync`: "converged" only when every endpoint was observed and is in sync. */
export function outcomeLine(outcome: CycleOutcome, mode: "plan" | "sync"): string {
	if (outcome.converged) return "converged: nothing to do";
	const parts: string[] = [];
	const byKind = new Map<FailureKind, number>();
	for (const f of outcome.failures) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
	const noun: Record<FailureKind, [string, string]> = {
		source: ["source problem", "source problems"],
		order: ["failed order", "failed orders"],
		endpoint: ["endpoint unreachable", "endpoints unreachable"],
		write: ["failed write", "failed writes"],
		probe: ["failed probe", "failed probes"],
		refused: ["refused update", "refused updates"],
		reload: ["reload breaker open", "reload breakers open"],
	};
	for (const [kind, n] of byKind) parts.push(`${n} ${noun[kind][n === 1 ? 0 : 1]}`);
	if (outcome.pending > 0) {
		parts.push(`${outcome.pending} ${mode === "plan" ? "pending" : "not done"}`);
	}
	return `not converged: ${parts.join(", ")} (${outcome.convergedEndpoints}/${outcome.endpoints} endpoints converged)`;
}
