/** What a cycle found and did: JSON-safe, free of key material. `plan --json` prints it unchanged. */
import { isIP } from "node:net";
import type { ErrorView } from "../errors.js";
import type {
	Action,
	ActionOp,
	BreakerState,
	BudgetView,
	ReloadReason,
	ReloadRecord,
	RenewalState,
	RenewalView,
	ReplacementView,
	ServingAfter,
} from "./model.js";
import type { CheckResult, RolloutView } from "./rollout.js";
import type { RefusalCode, Verdict } from "./verdict.js";

export type { RenewalState, RenewalView } from "./model.js";

/** One line of the audit trail (audit.ts): a write, a removal, or a name whose served certificate changed. */
export interface AuditEvent {
	event: "write" | "removal" | "served-change";
	target: string;
	endpoint: string;
	certificate?: string;
	ref?: string;
	op?: ActionOp;
	crtList?: string;
	/** served-change: the SNI name probed. */
	sni?: string;
	/** What the ref (or the name) held before; absent when it held nothing or the side does not say. */
	oldSerial?: string;
	/** What was written (or is served now); absent for a removal. */
	newSerial?: string;
	/** served-change: the name now serves the desired certificate. */
	match?: boolean;
}

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

/**
 * A certificate this cycle did not write to the endpoint, and why: `trust` (its chain does not verify against the
 * trust store: a failure, `failed`), `rollout` (a rollout stage has not reached the endpoint, or halted: pending,
 * or `failed` on a canary whose verification failed). Its steps are in the report, skipped (sync) with the reason.
 */
export interface HeldView {
	certificate: string;
	kind: "trust" | "rollout";
	code: string;
	message: string;
	hint?: string;
	failed: boolean;
}

export interface EndpointReport {
	target: string;
	endpoint: string;
	ok: boolean;
	error?: ErrorView;
	verdicts: Verdict[];
	steps: StepView[];
	notes: string[];
	/** crt-list file lines naming a certificate file that does not exist (each one fails the next reload). */
	crtListProblems?: Array<{ crtList: string; line: number; file: string }>;
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
	/** Certificates held back from this endpoint (a chain the trust store rejects, a rollout stage). */
	held?: HeldView[];
	/** sync, on a rollout's canary: what each check of each certificate in rollout found (reconcile/rollout-checks.ts). */
	rolloutChecks?: CheckResult[];
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
		/** An operator's deliberate replacement (`certificatee replace`): never-downgrade does not hold it back. */
		replacement?: ReplacementView;
	}>;
	/** `certificate`: the certificate a file of its name is about (a held one stays desired; see certificateProblems). */
	sourceProblems: SourceProblemView[];
	/** Certificates certificatee issues: where each stands after the cycle (absent in reports built by hand). */
	renewals?: RenewalView[];
	targets: TargetReport[];
	/** The configured rollout: each certificate's stage, canaries and the rest, and what halted it. */
	rollouts?: RolloutView[];
}

export interface SourceProblemView {
	subject: string;
	certificate?: string;
	code: string;
	message: string;
	hint?: string;
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

export type FailureKind =
	| "source"
	| "order"
	| "endpoint"
	| "write"
	| "probe"
	| "shadowed"
	| "refused"
	| "reload"
	/** A crt-list file line names a certificate file that does not exist: the next reload fails. */
	| "crt-list"
	/** A chain that does not verify against the configured trust store: never pushed. */
	| "trust"
	/** A rollout's verification failed on a canary: halted, the other endpoints keep the old certificate. */
	| "rollout";

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
	/** The certificate's view of it: what `status` says after "CERTIFICATE on TARGET/ENDPOINT: ". */
	reason?: string;
}

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

/** What to do, when the error itself carries no hint. */
const DEFAULT_HINT = {
	source: "fix or remove the file; the source's other certificates are still used",
	endpoint:
		"check that the endpoint is up and reachable from certificatee (address, socket path, credentials)",
	write: "see the endpoint's log; the write is retried next cycle",
} as const;

const REFUSAL_HINT: Record<RefusalCode, (certificate: string) => string> = {
	UPDATE_DROPS_NAMES: () =>
		"check the new certificate's names; set allow_name_removal: true on the target to push it anyway",
	UPDATE_WOULD_DOWNGRADE: (certificate) =>
		`a certificate that expires later is live on this ref (another member or an operator pushed it): a member whose store lags catches up by itself; to push this one anyway (a key compromise, a CA change), run certificatee replace ${certificate} --reason "…" (docs/cluster.md, Never downgrade)`,
	MANAGED_BY_HAPROXY_ACME: () =>
		"one ACME client per certificate: drop it from certificatee's configuration, or the acme keyword from HAProxy's load line (docs/layouts.md)",
	PLACEMENT_UNKNOWN: () =>
		"tell certificatee where HAProxy loads it from (crt_stores.<store>.crt_base / key_base; docs/haproxy-runtime-target.md)",
};

const BLOCKED_RENEWALS: ReadonlySet<RenewalState> = new Set(["failing", "backing-off", "capped"]);

const CANONICAL: ReadonlySet<string> = new Set(["in-sync", "stale", "missing", "refused"]);

type Shadowed = Extract<Verdict, { class: "shadowed" }>;

/** The ref a certificate belongs in on this endpoint (its canonical verdict's). */
function canonicalRef(e: EndpointReport, certificate: string): string | undefined {
	const v = e.verdicts.find(
		(x) => CANONICAL.has(x.class) && "certificate" in x && x.certificate === certificate,
	);
	return v && "ref" in v ? v.ref : undefined;
}

/**
 * Does a write still to run hand the name back to the desired certificate? The ref serving it now is rewritten
 * or removed, or a write for the certificate is planned and the plan's own prediction (servingAfter) does not have
 * another ref serving the name after it.
 */
function fixedByPendingWrite(e: EndpointReport, v: Shadowed, open: readonly StepView[]): boolean {
	if (!open.some((s) => s.certificate === v.certificate || s.ref === v.servedBy)) return false;
	if (v.servedBy !== undefined && open.some((s) => s.ref === v.servedBy)) return true;
	const after = e.servingAfter?.find((x) => x.sni === v.sni && x.certificate === v.certificate);
	// No runtime write of its ref is planned (a storage write a reload makes live): the sync tells.
	return after === undefined || after.ref === canonicalRef(e, v.certificate);
}

/** What frees a shadowed name, by what the culprit is. */
function shadowedHint(e: EndpointReport, v: Shadowed): string {
	const culprit = e.verdicts.find((x) => "ref" in x && x.ref === v.servedBy);
	const keeper = canonicalRef(e, v.certificate) ?? v.certificate;
	const probe = e.served.some((s) => s.sni === v.sni)
		? ""
		: "; or configure `probe` on the endpoint so certificatee sees which certificate HAProxy serves";
	switch (culprit?.class) {
		case "unaddressable":
			return `rename ${culprit.ref} on disk to a name the Data Plane API keeps unchanged (letters, digits, _ and - before the extension), or remove it if ${keeper} replaces it, then reload HAProxy: certificatee never touches it${probe}`;
		case "ambiguous":
			return `remove ${culprit.ref}, or make its names equal to ${keeper}'s (then it is a duplicate certificatee removes): certificatee leaves it alone${probe}`;
		case "unmanaged":
			return `remove ${culprit.ref} from HAProxy, or give ${v.sni} to one certificate only: certificatee never touches it${probe}`;
		default:
			return v.servedBy
				? `${v.servedBy} wins this name: see the endpoint's notes (shadowed, ambiguous, pinned)${probe}`
				: `another certificate wins this name: see the endpoint's notes (shadowed, ambiguous, pinned)${probe}`;
	}
}

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
		const error = s.error ?? { code: "ENDPOINT_ERROR" as const, message: "the write failed" };
		out.push({
			kind: "write",
			key: `write:${at}:${s.ref}:${s.op}`,
			subject: `${at} ${s.op} ${s.ref}`,
			...base,
			...(s.certificate ? { certificate: s.certificate } : {}),
			hint: DEFAULT_HINT.write,
			...error,
			reason: `${s.op} failed: ${error.code}: ${error.message}`,
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
			hint: REFUSAL_HINT[v.code](v.certificate),
			reason: `refused: ${v.why}`,
		});
	}
	for (const p of e.crtListProblems ?? []) {
		out.push({
			kind: "crt-list",
			key: `crt-list:${at}:${p.crtList}:${p.line}`,
			subject: `${p.crtList}:${p.line}`,
			...base,
			code: "CRT_LIST_LINE_UNRESOLVED",
			message: `${p.crtList} line ${p.line} names ${p.file}, which does not exist: HAProxy's next reload fails (unable to stat SSL certificate)`,
			hint: "remove the line, or put the certificate file back, before HAProxy reloads",
			reason: `crt-list ${p.crtList} line ${p.line} names a missing file ${p.file}`,
		});
	}
	for (const h of e.held ?? []) {
		if (!h.failed) continue;
		out.push({
			kind: h.kind,
			key: `${h.kind}:${at}:${h.certificate}:${h.code}`,
			subject: `${at} ${h.certificate}`,
			...base,
			certificate: h.certificate,
			code: h.code,
			message: h.message,
			...(h.hint ? { hint: h.hint } : {}),
			reason: `${h.code}: ${h.message}`,
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
	const open = e.steps.filter((s) => s.result === undefined);
	const held = e.reloads?.cycle?.decision === "held" ? e.reloads.cycle.certificates : [];
	// A name another ref serves (a probe saw it, a write hands it over, or with no probe it may be) is a failure
	// every cycle it lasts, unless a write still to run gives it back; its probe mismatch is the same failure.
	const shadowedNames = new Set<string>();
	for (const v of e.verdicts) {
		if (v.class !== "shadowed" || shadowedNames.has(`${v.sni} ${v.certificate}`)) continue;
		shadowedNames.add(`${v.sni} ${v.certificate}`);
		// A reload held back makes it live later: pending, with the reload's reason.
		if (held.includes(v.certificate) || fixedByPendingWrite(e, v, open)) continue;
		out.push({
			kind: "shadowed",
			key: `shadowed:${at}:${v.sni}:${v.certificate}`,
			subject: `${at} ${v.sni}`,
			...base,
			certificate: v.certificate,
			code: "SNI_SHADOWED",
			message: `${v.sni}: ${v.why}`,
			hint: shadowedHint(e, v),
			reason: `shadowed: ${v.why}`,
		});
	}
	// A mismatch a planned write will fix is pending, not failed; after the writes (sync) it is a failure.
	const fixing = new Set(open.map((s) => s.certificate));
	// A name waiting for a reload held back (budget, max_per_hour 0) is pending, reported with the reload's reason.
	for (const c of held) fixing.add(c);
	// A held certificate is served as it was, on purpose: its hold says why.
	const heldBack = new Set((e.held ?? []).map((h) => h.certificate));
	for (const s of e.served) {
		if (s.match || shadowedNames.has(`${s.sni} ${s.certificate}`) || heldBack.has(s.certificate)) continue;
		// A probe HAProxy refuses for want of a certificate is fixed by the write that deploys one, as a mismatch is.
		if ((s.error === undefined || s.noCertificate) && fixing.has(s.certificate)) continue;
		if (s.error === undefined && isIP(s.sni) !== 0) {
			out.push(ipNotDefault(at, base, s));
			continue;
		}
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
			reason: s.error
				? `probe of ${s.sni} failed: ${s.error}`
				: `${s.sni} serves serial ${s.servedSerial ?? "?"}, want ${s.expectedSerial}`,
		});
	}
	return out;
}

/**
 * A client reaching an IP address sends no SNI, so HAProxy answers with the bind's default certificate (the
 * first `crt` of the bind, or of its first crt-list line): a certificate with that IP must be it.
 */
function ipNotDefault(
	at: string,
	base: Pick<Failure, "target" | "endpoint">,
	s: { sni: string; certificate: string; servedSerial?: string; expectedSerial: string },
): Failure {
	const says = `${s.sni} (no SNI) serves serial ${s.servedSerial ?? "?"}, want ${s.expectedSerial}: certificate ${s.certificate} is not the bind's default certificate`;
	return {
		kind: "probe",
		key: `probe:${at}:${s.sni}`,
		subject: `${at} ${s.sni}`,
		...base,
		certificate: s.certificate,
		code: "IP_NOT_DEFAULT_CERTIFICATE",
		message: says,
		hint: `clients of an IP address send no SNI and get the bind's default certificate: make ${s.certificate} the first certificate of the bind that answers ${s.sni} (its first crt, or the first line of its crt-list), on a bind of its own per IP address (docs/layouts.md, "IP address certificates")`,
		reason: says,
	};
}

/** Certificates certificatee issues that have none yet (never issued, or none valid): every endpoint waits for them. */
export function absentCertificates(report: CycleReport): RenewalView[] {
	const present = new Set(report.certificates.map((c) => c.name));
	return (report.renewals ?? []).filter((r) => !present.has(r.certificate));
}

/**
 * The one verdict on an endpoint. `absent`: the certificates it should carry that do not exist yet
 * (`absentCertificates`): it is not converged while one is missing. Every view reads this (CLI, status,
 * /status.json, the fleet page, metrics, /readyz, the daemon's log).
 */
export function endpointState(e: EndpointReport, absent: readonly RenewalView[] = []): EndpointState {
	const index = indexOf(e);
	if (index.state.state !== "converged" || absent.length === 0) return index.state;
	const first = absent[0] as RenewalView;
	const more = absent.length > 1 ? ` (and ${absent.length - 1} more)` : "";
	return { state: "pending", reason: `${first.certificate}: not issued yet (${first.state})${more}` };
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

/** Each certificate the endpoint carries, decided from the endpoint's failures, steps, notes and reloads. */
function certificatesOn(e: EndpointReport, failures: readonly Failure[]): Map<string, CertificateOnEndpoint> {
	const certificates = new Map<string, CertificateOnEndpoint>();
	const canonical = new Map<string, Verdict & { ref: string }>();
	const carried = new Set<string>();
	for (const v of e.verdicts) {
		if (!("certificate" in v) || v.certificate === undefined) continue;
		carried.add(v.certificate);
		if (CANONICAL.has(v.class) && "ref" in v && !canonical.has(v.certificate))
			canonical.set(v.certificate, v);
	}
	const stepsByRef = new Map<string, StepView[]>();
	for (const s of e.steps) {
		const list = stepsByRef.get(s.ref);
		if (list) list.push(s);
		else stepsByRef.set(s.ref, [s]);
	}
	const openFor = new Set(e.steps.filter((s) => s.result === undefined).flatMap((s) => s.certificate ?? []));
	// A note about a ref starts with "<ref>: ".
	const notes = new Map<string, string>();
	for (const n of e.notes) {
		for (let i = n.indexOf(":"); i >= 0; i = n.indexOf(":", i + 1)) {
			const prefix = n.slice(0, i);
			if (!notes.has(prefix)) notes.set(prefix, n.slice(i + 1).trim());
		}
	}
	const failed = new Map<string, Failure>();
	for (const f of failures)
		if (f.certificate !== undefined && !failed.has(f.certificate)) failed.set(f.certificate, f);
	const held = e.reloads?.cycle?.decision === "held" ? e.reloads.cycle : undefined;
	const holds = new Map((e.held ?? []).map((h) => [h.certificate, h]));
	for (const certificate of carried) {
		const verdict = canonical.get(certificate);
		if (verdict === undefined) continue;
		const hold = holds.get(certificate);
		if (hold && !failed.has(certificate)) {
			certificates.set(certificate, {
				state: "pending",
				refInSync: false,
				converged: false,
				reason: `${hold.code}: ${hold.message}`,
			});
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
	verdict: Verdict & { ref: string };
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

/** Every failure of a cycle: source files, orders (this cycle's and those still blocked), endpoints. */
export function cycleFailures(report: CycleReport): Failure[] {
	const sources = report.sourceProblems.map(sourceFailure);
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
	const endpoints = report.targets.flatMap((t) => t.endpoints.flatMap(endpointFailures));
	// A halted rollout fails the cycle even where no canary ran in it (plan, or another member's canary).
	const rollouts = (report.rollouts ?? [])
		.filter(
			(r) =>
				r.stage === "halted" &&
				!endpoints.some((f) => f.kind === "rollout" && f.certificate === r.certificate),
		)
		.map((r): Failure => {
			const f = r.failure;
			return {
				kind: "rollout",
				key: `rollout:${r.certificate}`,
				subject: r.certificate,
				certificate: r.certificate,
				...(f ? { endpoint: f.endpoint } : {}),
				code: f?.code ?? "ROLLOUT_HALTED",
				message: `rollout of ${r.certificate} (serial ${r.serial}) halted${f ? `: ${f.check} check failed on canary ${f.endpoint}: ${f.message}` : ""}`,
				hint: f?.hint ?? "a new version of the certificate starts the rollout again",
			};
		});
	return [...sources, ...orders, ...endpoints, ...rollouts];
}

/**
 * The source problems of each certificate, by name: the files of its name that could not be used (invalid, or expiring
 * before the one served). Its last valid certificate may still be the desired one (held by its source), so a
 * certificate can be converged everywhere and still need a human: every view lists these beside it.
 */
export function certificateProblems(report: CycleReport): Map<string, Failure[]> {
	const out = new Map<string, Failure[]>();
	for (const p of report.sourceProblems) {
		if (p.certificate === undefined) continue;
		const list = out.get(p.certificate);
		if (list) list.push(sourceFailure(p));
		else out.set(p.certificate, [sourceFailure(p)]);
	}
	return out;
}

function sourceFailure(p: SourceProblemView): Failure {
	return {
		kind: "source",
		key: `source:${p.subject}:${p.code}`,
		subject: p.subject,
		...(p.certificate ? { certificate: p.certificate } : {}),
		code: p.code,
		message: p.message,
		hint: p.hint ?? DEFAULT_HINT.source,
	};
}

export interface CycleOutcome {
	failures: Failure[];
	/**
	 * Writes planned or skipped, reloads held back, certificates waiting on an endpoint for what this cycle
	 * cannot do (a reload), plus certificates due to be ordered.
	 */
	pending: number;
	/** Writes done this cycle. */
	written: number;
	endpoints: number;
	/** Endpoints observed, nothing failed, nothing pending, every certificate on them converged (endpointState). */
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
	const absent = absentCertificates(report);
	// A reload held back (budget, max_per_hour 0) leaves what it would make live not served: pending.
	const held = endpoints.filter((e) => e.reloads?.cycle?.decision === "held").length;
	const waiting = endpoints.reduce((n, e) => n + (e.ok ? indexOf(e).waiting : 0), 0);
	const due = (report.renewals ?? []).filter((r) => r.state === "due").length;
	const pending = writes.open + held + waiting + due;
	const convergedEndpoints = endpoints.filter((e) => endpointState(e, absent).state === "converged").length;
	return {
		failures,
		pending,
		written: writes.done,
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
	if (outcome.converged)
		return outcome.written === 0
			? "converged: nothing to do"
			: `converged: ${outcome.written} write${outcome.written === 1 ? "" : "s"} done`;
	const parts: string[] = [];
	const byKind = new Map<FailureKind, number>();
	for (const f of outcome.failures) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
	const noun: Record<FailureKind, [string, string]> = {
		source: ["source problem", "source problems"],
		order: ["failed order", "failed orders"],
		endpoint: ["endpoint unreachable", "endpoints unreachable"],
		write: ["failed write", "failed writes"],
		probe: ["failed probe", "failed probes"],
		shadowed: ["shadowed name", "shadowed names"],
		refused: ["refused update", "refused updates"],
		reload: ["reload breaker open", "reload breakers open"],
		"crt-list": ["crt-list line naming a missing file", "crt-list lines naming missing files"],
		trust: ["chain not trusted", "chains not trusted"],
		rollout: ["rollout halted", "rollouts halted"],
	};
	for (const [kind, n] of byKind) parts.push(`${n} ${noun[kind][n === 1 ? 0 : 1]}`);
	if (outcome.pending > 0) {
		parts.push(`${outcome.pending} ${mode === "plan" ? "pending" : "not done"}`);
	}
	return `not converged: ${parts.join(", ")} (${outcome.convergedEndpoints}/${outcome.endpoints} endpoints converged)`;
}
