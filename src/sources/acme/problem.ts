/** Turns whatever an ACME exchange threw into one CertificateeError carrying the CA's problem type and detail. */
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import type { AcmeProblem } from "./transport.js";

const ACME_URN = "urn:ietf:params:acme:error:";

/** Problem types a later attempt cannot fix without an operator. */
const PERMANENT = new Set([
	"rejectedIdentifier",
	"unsupportedIdentifier",
	"caa",
	"malformed",
	"badCSR",
	"badPublicKey",
	"badSignatureAlgorithm",
	"externalAccountRequired",
	"accountDoesNotExist",
	"userActionRequired",
	"unsupportedContact",
	"invalidContact",
	"invalidProfile",
]);

function hintFor(short: string, scope: ProblemScope): string {
	switch (short) {
		case "rejectedIdentifier":
		case "unsupportedIdentifier":
			return "the CA refuses to issue for this name: check the certificate's domains against the CA's policy";
		case "caa":
			return "a CAA record forbids this CA for the name: add the CA to the domain's CAA records";
		case "connection":
		case "incorrectResponse":
		case "unauthorized":
		case "dns":
		case "tls":
			if (scope.challenge === "dns-01")
				return "the CA could not see the TXT record: check that dns_hook really publishes it in the zone's authoritative DNS (raise dns_propagation_wait if it is slow)";
			return scope.http01?.startsWith("haproxy-map ")
				? `the CA could not validate although every node of ${scope.http01} answered the token on its http_address: port 80 of the name must reach one of those nodes (DNS, firewall, a redirect before the map rule?)`
				: `the CA could not validate: http://<name>/.well-known/acme-challenge/ (port 80) must reach the HTTP-01 responder at ${scope.http01 ?? "http01.listen"}, e.g. through an HAProxy route`;
		case "invalidProfile":
			return scope.profiles && scope.profiles.length > 0
				? `the CA refuses this profile (for this account or these identifiers); it lists: ${scope.profiles.join(", ")}. Set profile to one it offers`
				: "the CA refuses this profile: remove profile, or name one the CA's directory lists (certificatee validate --online)";
		case "rateLimited":
			return "the CA is rate limiting this account or name: wait for the time it states";
		case "externalAccountRequired":
			return "this CA requires External Account Binding: set eab.kid and eab.hmac_key(_file)";
		case "accountDoesNotExist":
			return "the stored account is unknown to the CA: delete the issuer's accounts/<name> record in state_dir; a new account is registered at the next order";
		case "userActionRequired":
			return "the CA requires action on its website (e.g. new terms of service)";
		case "serverInternal":
		case "badNonce":
			return "the CA had a transient problem: it is retried with backoff";
		default:
			return "see the CA's problem detail";
	}
}

export function describeProblem(p: AcmeProblem): string {
	const sub = (p.subproblems ?? []).map((s) => `; ${s.identifier ?? "?"}: ${s.detail} (${s.type})`).join("");
	return `${p.detail || "(no detail)"} (${p.type})${sub}`;
}

export interface ProblemScope {
	certificate?: string;
	operation: string;
	endpoint: string;
	/** The HTTP-01 responder address, for hints. */
	http01?: string;
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
	const subject = scope.certificate ? ` for ${scope.certificate}` : "";
	if (scope.signal.aborted) {
		const reason = scope.signal.reason as { name?: string } | undefined;
		const timedOut = reason?.name === "TimeoutError";
		return new CertificateeError(
			"ISSUE_FAILED",
			`ACME ${scope.operation}${subject} ${timedOut ? "timed out" : "was cancelled"}`,
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
	if (isCertificateeError(e)) {
		// A copy: the same error may reach several callers (a shared account registration).
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
	const problem = matchProblem(describeError(e), scope.problems, scope.resourceUrl);
	if (!problem) {
		return new CertificateeError(
			"ACME_ERROR",
			`ACME ${scope.operation}${subject} failed: ${describeError(e)}`,
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
	const short = problem.type.startsWith(ACME_URN) ? problem.type.slice(ACME_URN.length) : problem.type;
	return new CertificateeError(
		"ACME_ERROR",
		`ACME ${scope.operation}${subject} failed: ${describeProblem(problem)}`,
		{
			context: {
				endpoint: scope.endpoint,
				operation: scope.operation,
				problem: problem.type,
				...(problem.status ? { status: problem.status } : {}),
				...(scope.certificate ? { certificate: scope.certificate } : {}),
			},
			hint: hintFor(short, scope),
			retryable: !PERMANENT.has(short),
			cause: e,
		},
	);
}
