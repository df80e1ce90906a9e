/** Turns whatever an ACME exchange threw into one CertificateeError carrying the CA's problem type and detail. */
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import type { Http01Via } from "./http01.js";
import type { AcmeProblem } from "./transport.js";

const ACME_URN = "urn:ietf:params:acme:error:";

/** What certificatee says of one ACME problem type: whether a later attempt can fix it, and what to do. */
interface ProblemRule {
	/** A later attempt cannot fix it without an operator. */
	permanent: boolean;
	hint: string | ((scope: ProblemScope) => string);
}

const SEE_DETAIL = "see the CA's problem detail";
const REFUSED_NAME: ProblemRule = {
	permanent: true,
	hint: "the CA refuses to issue for this name: check the certificate's domains against the CA's policy",
};
const UNVALIDATED: ProblemRule = { permanent: false, hint: unvalidatedHint };
const TRANSIENT: ProblemRule = {
	permanent: false,
	hint: "the CA had a transient problem: it is retried with backoff",
};
const PERMANENT_SEE_DETAIL: ProblemRule = { permanent: true, hint: SEE_DETAIL };
/** A problem type of no rule: retried, the CA's detail is the hint. */
const UNKNOWN: ProblemRule = { permanent: false, hint: SEE_DETAIL };

/** By the problem type's short name (after urn:ietf:params:acme:error:); a Map, as the CA names the key. */
const PROBLEM_RULES: ReadonlyMap<string, ProblemRule> = new Map([
	["rejectedIdentifier", REFUSED_NAME],
	["unsupportedIdentifier", REFUSED_NAME],
	[
		"caa",
		{
			permanent: true,
			hint: "a CAA record forbids this CA for the name: add the CA to the domain's CAA records",
		},
	],
	["connection", UNVALIDATED],
	["incorrectResponse", UNVALIDATED],
	["unauthorized", UNVALIDATED],
	["dns", UNVALIDATED],
	["tls", UNVALIDATED],
	["invalidProfile", { permanent: true, hint: invalidProfileHint }],
	[
		"rateLimited",
		{ permanent: false, hint: "the CA is rate limiting this account or name: wait for the time it states" },
	],
	[
		"externalAccountRequired",
		{
			permanent: true,
			hint: "this CA requires External Account Binding: set eab.kid and eab.hmac_key(_file)",
		},
	],
	[
		"accountDoesNotExist",
		{
			permanent: true,
			hint: "the stored account is unknown to the CA: delete the issuer's accounts/<name> record in state_dir; a new account is registered at the next order",
		},
	],
	[
		"userActionRequired",
		{ permanent: true, hint: "the CA requires action on its website (e.g. new terms of service)" },
	],
	["serverInternal", TRANSIENT],
	["badNonce", TRANSIENT],
	["malformed", PERMANENT_SEE_DETAIL],
	["badCSR", PERMANENT_SEE_DETAIL],
	["badPublicKey", PERMANENT_SEE_DETAIL],
	["badSignatureAlgorithm", PERMANENT_SEE_DETAIL],
	["unsupportedContact", PERMANENT_SEE_DETAIL],
	["invalidContact", PERMANENT_SEE_DETAIL],
]);

/** The CA could not validate a challenge: what must reach what, by the challenge and where HTTP-01 is answered. */
function unvalidatedHint(scope: ProblemScope): string {
	if (scope.challenge === "dns-01")
		return "the CA could not see the TXT record: check that dns_hook really publishes it in the zone's authoritative DNS (raise dns_propagation_wait if it is slow)";
	return scope.http01?.via === "haproxy-map"
		? `the CA could not validate although every node of ${scope.http01.address} answered the token on its http_address: port 80 of the name must reach one of those nodes (DNS, firewall, a redirect before the map rule?)`
		: `the CA could not validate: http://<name>/.well-known/acme-challenge/ (port 80) must reach the HTTP-01 responder at ${scope.http01?.address ?? "http01.listen"}, e.g. through an HAProxy route`;
}

function invalidProfileHint(scope: ProblemScope): string {
	return scope.profiles && scope.profiles.length > 0
		? `the CA refuses this profile (for this account or these identifiers); it lists: ${scope.profiles.join(", ")}. Set profile to one it offers`
		: "the CA refuses this profile: remove profile, or name one the CA's directory lists (certificatee validate --online)";
}

export function describeProblem(p: AcmeProblem): string {
	const sub = (p.subproblems ?? []).map((s) => `; ${s.identifier ?? "?"}: ${s.detail} (${s.type})`).join("");
	return `${p.detail || "(no detail)"} (${p.type})${sub}`;
}

export interface ProblemScope {
	certificate?: string;
	operation: string;
	endpoint: string;
	/** Where HTTP-01 answers are served, for hints. */
	http01?: { address: string; via: Http01Via };
	/** The challenge being validated, when the failure is a validation. */
	challenge?: string;
	/** The profiles the CA's directory lists, when a profile was asked for (for the invalidProfile hint). */
	profiles?: string[];
	/** Prefer problems from this resource (the authorization that failed). */
	resourceUrl?: string;
	problems: readonly AcmeProblem[];
	signal: AbortSignal;
}

/** The problem acme-client's error message is about (it keeps only the detail). */
function matchProblem(
	message: string,
	all: readonly AcmeProblem[],
	resourceUrl?: string,
): AcmeProblem | undefined {
	const own = resourceUrl ? all.filter((p) => p.url === resourceUrl) : [];
	const problems = own.length > 0 ? own : all;
	const flat = message.replace(/\n/g, "");
	const matching = problems.filter((p) => p.detail && flat.includes(p.detail.replace(/\n/g, "")));
	// Without a match, only a problem of the failing resource itself is trusted (a stale badNonce is not).
	return matching.at(-1) ?? own.at(-1);
}

export function toAcmeError(e: unknown, scope: ProblemScope): CertificateeError {
	if (scope.signal.aborted) return stoppedError(e, scope);
	if (isCertificateeError(e)) return scopedCopy(e, scope);
	const problem = matchProblem(describeError(e), scope.problems, scope.resourceUrl);
	return problem ? problemError(e, problem, scope) : unexplainedError(e, scope);
}

function subjectOf(scope: ProblemScope): string {
	return scope.certificate ? ` for ${scope.certificate}` : "";
}

/** The exchange was cancelled, or ran past the issuer's timeout. */
function stoppedError(e: unknown, scope: ProblemScope): CertificateeError {
	const reason = scope.signal.reason as { name?: string } | undefined;
	const timedOut = reason?.name === "TimeoutError";
	return new CertificateeError(
		"ISSUE_FAILED",
		`ACME ${scope.operation}${subjectOf(scope)} ${timedOut ? "timed out" : "was cancelled"}`,
		{
			context: {
				endpoint: scope.endpoint,
				operation: scope.operation,
				...(scope.certificate ? { certificate: scope.certificate } : {}),
			},
			hint: timedOut ? "the CA was slow: raise the issuer's timeout, or check the CA's status" : undefined,
			retryable: true,
			cause: e,
		},
	);
}

/** A copy: the same error may reach several callers (a shared account registration). */
function scopedCopy(e: CertificateeError, scope: ProblemScope): CertificateeError {
	return new CertificateeError(e.code, e.message, {
		context: {
			operation: scope.operation,
			...(scope.certificate ? { certificate: scope.certificate } : {}),
			...e.context,
		},
		...(e.hint === undefined ? {} : { hint: e.hint }),
		retryable: e.retryable,
		cause: e.cause,
	});
}

/** A failure no problem document explains (a network error, an unexpected answer). */
function unexplainedError(e: unknown, scope: ProblemScope): CertificateeError {
	return new CertificateeError(
		"ACME_ERROR",
		`ACME ${scope.operation}${subjectOf(scope)} failed: ${describeError(e)}`,
		{
			context: {
				endpoint: scope.endpoint,
				operation: scope.operation,
				...(scope.certificate ? { certificate: scope.certificate } : {}),
			},
			retryable: true,
			cause: e,
		},
	);
}

/** A failure the CA explained with a problem document: its rule says whether to retry and what to do. */
function problemError(e: unknown, problem: AcmeProblem, scope: ProblemScope): CertificateeError {
	const short = problem.type.startsWith(ACME_URN) ? problem.type.slice(ACME_URN.length) : problem.type;
	const rule = PROBLEM_RULES.get(short) ?? UNKNOWN;
	return new CertificateeError(
		"ACME_ERROR",
		`ACME ${scope.operation}${subjectOf(scope)} failed: ${describeProblem(problem)}`,
		{
			context: {
				endpoint: scope.endpoint,
				operation: scope.operation,
				problem: problem.type,
				...(problem.status ? { status: problem.status } : {}),
				...(scope.certificate ? { certificate: scope.certificate } : {}),
			},
			hint: typeof rule.hint === "string" ? rule.hint : rule.hint(scope),
			retryable: !rule.permanent,
			cause: e,
		},
	);
}
