/**
 * What "failed" means, defined once: every failure of an endpoint, with what an operator needs to act on it
 * (outcome.ts adds the cycle's own: sources, orders, rollouts). The CLI's exit codes and last line, the daemon's
 * logs, /readyz and the metrics all read these.
 */
import { isIP } from "node:net";
import type { EndpointReport, ServedView, StepView } from "./report.js";
import { type CanonicalVerdict, isCanonical, type RefusalCode, type Verdict } from "./verdict.js";

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

/** What to do, when the error itself carries no hint. */
const DEFAULT_HINT = {
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
	SCTL_HOT_SWAP_UNSAFE: () =>
		"remove the .sctl file beside the certificate and reload HAProxy once (modern certificates carry their SCTs inside); certificatee then renews it without reloads (docs/layouts.md, Companion files)",
	PLACEMENT_UNKNOWN: () =>
		"tell certificatee where HAProxy loads it from (haproxy_config, or crt_stores.<store>.crt_base / key_base; docs/haproxy-runtime-target.md)",
	HAPROXY_CONFIG_INVALID: () =>
		"fix haproxy_config (the file HAProxy runs, readable by certificatee; haproxy -c -f <file> must accept it) or remove it from the target",
	HAPROXY_CONFIG_MISMATCH: () =>
		"reload HAProxy (its configuration changed since the last reload) or point haproxy_config at the file HAProxy runs",
};

type Shadowed = Extract<Verdict, { class: "shadowed" }>;

/** The endpoint a failure is about: "target/endpoint", and the fields every failure of it carries. */
interface Where {
	at: string;
	base: { target: string; endpoint: string };
}

/** One rule: the failures of one kind an endpoint report shows. */
type EndpointRule = (e: EndpointReport, where: Where) => Failure[];

/** Every failure of an endpoint, in the order an operator would fix them. */
export function endpointFailures(e: EndpointReport): Failure[] {
	const where = { at: `${e.target}/${e.endpoint}`, base: { target: e.target, endpoint: e.endpoint } };
	if (!e.ok) return [unreachable(e, where)];
	return ENDPOINT_RULES.flatMap((rule) => rule(e, where));
}

function unreachable(e: EndpointReport, { at, base }: Where): Failure {
	const err = e.error ?? { code: "ENDPOINT_ERROR", message: "the endpoint did not answer" };
	return {
		kind: "endpoint",
		key: `endpoint:${at}`,
		subject: at,
		...base,
		hint: DEFAULT_HINT.endpoint,
		...err,
	};
}

const failedWrites: EndpointRule = (e, { at, base }) =>
	e.steps
		.filter((s) => s.result === "failed")
		.map((s): Failure => {
			const error = s.error ?? { code: "ENDPOINT_ERROR" as const, message: "the write failed" };
			return {
				kind: "write",
				key: `write:${at}:${s.ref}:${s.op}`,
				subject: `${at} ${s.op} ${s.ref}`,
				...base,
				...(s.certificate ? { certificate: s.certificate } : {}),
				hint: DEFAULT_HINT.write,
				...error,
				reason: `${s.op} failed: ${error.code}: ${error.message}`,
			};
		});

const refusedUpdates: EndpointRule = (e, { at, base }) =>
	e.verdicts.flatMap((v): Failure[] =>
		v.class !== "refused"
			? []
			: [
					{
						kind: "refused",
						key: `refused:${at}:${v.ref}`,
						subject: `${at} ${v.ref}`,
						...base,
						certificate: v.certificate,
						code: v.code,
						message: `${v.ref}: ${v.why}`,
						hint: v.hint ?? REFUSAL_HINT[v.code](v.certificate),
						reason: `refused: ${v.why}`,
					},
				],
	);

const unresolvedCrtListLines: EndpointRule = (e, { at, base }) =>
	(e.crtListProblems ?? []).map(
		(p): Failure => ({
			kind: "crt-list",
			key: `crt-list:${at}:${p.crtList}:${p.line}`,
			subject: `${p.crtList}:${p.line}`,
			...base,
			code: "CRT_LIST_LINE_UNRESOLVED",
			message: `${p.crtList} line ${p.line} names ${p.file}, which does not exist: HAProxy's next reload fails (unable to stat SSL certificate)`,
			hint: "remove the line, or put the certificate file back, before HAProxy reloads",
			reason: `crt-list ${p.crtList} line ${p.line} names a missing file ${p.file}`,
		}),
	);

const failedHolds: EndpointRule = (e, { at, base }) =>
	(e.held ?? [])
		.filter((h) => h.failed)
		.map(
			(h): Failure => ({
				kind: h.kind,
				key: `${h.kind}:${at}:${h.certificate}:${h.code}`,
				subject: `${at} ${h.certificate}`,
				...base,
				certificate: h.certificate,
				code: h.code,
				message: h.message,
				...(h.hint ? { hint: h.hint } : {}),
				reason: `${h.code}: ${h.message}`,
			}),
		);

const openBreaker: EndpointRule = (e, { at, base }) => {
	const breaker = e.reloads?.breaker;
	if (!breaker) return [];
	const failedNow = e.reloads?.cycle?.decision === "reloaded" && e.reloads.cycle.result !== "ok";
	return [
		{
			kind: "reload",
			key: `reload:${at}`,
			subject: at,
			...base,
			code: failedNow ? "RELOAD_FAILED" : "RELOAD_BREAKER_OPEN",
			message: `${at}: reload breaker open since ${breaker.openedAt}: ${breaker.message}; no writes to this endpoint`,
			hint: "fix HAProxy (haproxy -c, its log) until it serves what was written: the breaker closes by itself at the next cycle whose probes all match; or clear it (docs/reloads.md)",
		},
	];
};

/** Steps not run yet (a plan, or skipped). */
const openSteps = (e: EndpointReport): StepView[] => e.steps.filter((s) => s.result === undefined);

/** The certificates a reload held back (budget, max_per_hour 0) would make live: pending, not failed. */
const awaitingHeldReload = (e: EndpointReport): readonly string[] =>
	e.reloads?.cycle?.decision === "held" ? e.reloads.cycle.certificates : [];

/** Each shadowed name once, by "sni certificate". */
function shadowedNames(e: EndpointReport): Map<string, Shadowed> {
	const names = new Map<string, Shadowed>();
	for (const v of e.verdicts)
		if (v.class === "shadowed" && !names.has(`${v.sni} ${v.certificate}`))
			names.set(`${v.sni} ${v.certificate}`, v);
	return names;
}

/**
 * A name another ref serves (a probe saw it, a write hands it over, or with no probe it may be) is a failure
 * every cycle it lasts, unless a write still to run gives it back; its probe mismatch is the same failure.
 */
const shadowedNameFailures: EndpointRule = (e, { at, base }) => {
	const open = openSteps(e);
	const held = awaitingHeldReload(e);
	return [...shadowedNames(e).values()]
		.filter((v) => !held.includes(v.certificate) && !fixedByPendingWrite(e, v, open))
		.map(
			(v): Failure => ({
				kind: "shadowed",
				key: `shadowed:${at}:${v.sni}:${v.certificate}`,
				subject: `${at} ${v.sni}`,
				...base,
				certificate: v.certificate,
				code: "SNI_SHADOWED",
				message: `${v.sni}: ${v.why}`,
				hint: shadowedHint(e, v),
				reason: `shadowed: ${v.why}`,
			}),
		);
};

/** The ref a certificate belongs in on this endpoint (its canonical verdict's). */
function canonicalRef(e: EndpointReport, certificate: string): string | undefined {
	return e.verdicts.find((v): v is CanonicalVerdict => isCanonical(v) && v.certificate === certificate)?.ref;
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

/** Probes that did not see the desired certificate, but those a shadowed name, a hold or a write to run explains. */
const probeFailures: EndpointRule = (e, where) => {
	const shadowed = shadowedNames(e);
	// A mismatch a planned write will fix is pending, not failed; after the writes (sync) it is a failure. A name
	// waiting for a reload held back (budget, max_per_hour 0) is pending, reported with the reload's reason.
	const fixing = new Set([...openSteps(e).map((s) => s.certificate), ...awaitingHeldReload(e)]);
	// A held certificate is served as it was, on purpose: its hold says why.
	const heldBack = new Set((e.held ?? []).map((h) => h.certificate));
	const explained = (s: ServedView) =>
		s.match ||
		shadowed.has(`${s.sni} ${s.certificate}`) ||
		heldBack.has(s.certificate) ||
		// A probe HAProxy refuses for want of a certificate is fixed by the write that deploys one, as a mismatch is.
		((s.error === undefined || s.noCertificate === true) && fixing.has(s.certificate));
	return e.served
		.filter((s) => !explained(s))
		.map((s) =>
			s.error === undefined && isIP(s.sni) !== 0 ? ipNotDefault(where, s) : probeMismatch(where, s),
		);
};

function probeMismatch({ at, base }: Where, s: ServedView): Failure {
	const mismatch = `${s.sni} serves serial ${s.servedSerial ?? "?"}, want ${s.expectedSerial}`;
	return {
		kind: "probe",
		key: `probe:${at}:${s.sni}`,
		subject: `${at} ${s.sni}`,
		...base,
		certificate: s.certificate,
		code: "PROBE_FAILED",
		message: s.error ? `probe of ${s.sni}: ${s.error}` : mismatch,
		hint: s.error
			? "check the endpoint's probe address (host:port of the TLS listener)"
			: "another ref wins this SNI name: see the endpoint's notes (shadowed, ambiguous, pinned)",
		reason: s.error ? `probe of ${s.sni} failed: ${s.error}` : mismatch,
	};
}

/**
 * A client reaching an IP address sends no SNI, so HAProxy answers with the bind's default certificate (the
 * first `crt` of the bind, or of its first crt-list line): a certificate with that IP must be it.
 */
function ipNotDefault({ at, base }: Where, s: ServedView): Failure {
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

/** The endpoint's rules, in the order an operator would fix what they find. */
const ENDPOINT_RULES: readonly EndpointRule[] = [
	failedWrites,
	refusedUpdates,
	unresolvedCrtListLines,
	failedHolds,
	openBreaker,
	shadowedNameFailures,
	probeFailures,
];
