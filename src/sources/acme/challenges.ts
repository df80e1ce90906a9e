/**
 * Answering an order's challenges: HTTP-01 through the built-in responder or HAProxy maps, DNS-01 (and every wildcard)
 * through the operator's hook or RFC 2136 updates. Publish all, validate all, then clean up all.
 */
import type acme from "acme-client";
import { CertificateeError } from "../../errors.js";
import { type DnsHook, dnsRecordName } from "./dns01.js";
import type { Http01Responder } from "./http01.js";
import { type PollOptions, waitForStatus } from "./poll.js";
import { type ProblemScope, toAcmeError } from "./problem.js";
import { sleep } from "./transport.js";

type Authorization = Awaited<ReturnType<acme.Client["getAuthorizations"]>>[number];
type Challenge = Authorization["challenges"][number];

interface Published {
	authz: Authorization;
	challenge: Challenge;
	cleanup: () => Promise<void>;
}

export interface ChallengeSolverOptions {
	issuer: string;
	directoryUrl: string;
	/** Absent when HTTP-01 is not configured. */
	responder: Http01Responder | undefined;
	/** Absent when DNS-01 is not configured: the operator's hook or the RFC 2136 publisher. */
	dnsHook: DnsHook | undefined;
	dnsHookTimeoutMs: number;
	propagationWaitMs: number;
	/** How an authorization is polled once its challenge is answered. */
	poll: Omit<PollOptions, "signal">;
	logger: { warn(fields: object, message: string): void };
}

export interface ChallengeSolver {
	/** Makes every authorization of an order valid, or throws the first failure (with its ACME problem). */
	validateAll(client: acme.Client, authorizations: Authorization[], scope: ProblemScope): Promise<void>;
}

function firstFailure(outcomes: PromiseSettledResult<unknown>[]): void {
	const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
	if (failed) throw failed.reason;
}

export function createChallengeSolver(options: ChallengeSolverOptions): ChallengeSolver {
	const { issuer, directoryUrl, responder, dnsHook, dnsHookTimeoutMs, propagationWaitMs, poll, logger } =
		options;

	/** Publishes the answer to one authorization's challenge; returns what to tell the CA and how to clean up. */
	async function publish(client: acme.Client, authz: Authorization, signal: AbortSignal): Promise<Published> {
		const domain = authz.identifier.value;
		const wildcard = authz.wildcard === true;
		// RFC 8738 §7: no DNS-01 for an IP address.
		const ip = authz.identifier.type === "ip";
		const type = !wildcard && responder ? "http-01" : dnsHook && !ip ? "dns-01" : undefined;
		if (!type && ip) {
			throw new CertificateeError(
				"ISSUE_FAILED",
				`IP address ${domain} can only be validated over HTTP-01, and issuer ${issuer} answers only DNS-01`,
				{
					context: { field: "http01" },
					hint: "RFC 8738 allows no DNS-01 for IP addresses: set the issuer's http01 (listen or via: haproxy-map)",
				},
			);
		}
		if (!type) {
			throw new CertificateeError(
				"ISSUE_FAILED",
				`*.${domain} needs a DNS-01 challenge but neither dns_hook nor dns01 is configured`,
				{
					context: { field: "dns_hook" },
					hint: "wildcard names can only be validated over DNS: set dns01.rfc2136 or dns_hook",
				},
			);
		}
		const challenge = authz.challenges.find((c) => c.type === type);
		if (!challenge) {
			const offered = authz.challenges.map((c) => c.type).join(", ");
			throw new CertificateeError(
				"ACME_ERROR",
				`the CA offers no ${type} challenge for ${domain} (offers: ${offered})`,
				{
					context: { endpoint: directoryUrl },
					hint: type === "http-01" ? "configure dns01.rfc2136 or dns_hook" : "configure http01",
				},
			);
		}
		const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
		if (type === "http-01") {
			const cleanup = await responder!.publish(challenge.token, keyAuthorization, domain, signal);
			return { authz, challenge, cleanup };
		}
		const record = dnsRecordName(domain);
		await dnsHook!.run("set", record, keyAuthorization, signal);
		// Clearing runs even after cancellation, bounded by the hook timeout.
		const cleanup = () =>
			dnsHook!.run("clear", record, keyAuthorization, AbortSignal.timeout(dnsHookTimeoutMs));
		return { authz, challenge, cleanup };
	}

	/**
	 * All answers are published before the CA is asked to validate any, and removed only after all are done:
	 * `example.com` and `*.example.com` share one TXT record name, so clearing one early would fail the other.
	 */
	async function validateAll(
		client: acme.Client,
		authorizations: Authorization[],
		scope: ProblemScope,
	): Promise<void> {
		const signal = scope.signal;
		const pending = authorizations.filter((a) => a.status !== "valid"); // valid ones are reused
		const published = await Promise.allSettled(pending.map((a) => publish(client, a, signal)));
		const ready = published.flatMap((p) => (p.status === "fulfilled" ? [p.value] : []));
		try {
			firstFailure(published);
			if (propagationWaitMs > 0 && ready.some((p) => p.challenge.type === "dns-01"))
				await sleep(propagationWaitMs, signal);
			firstFailure(
				await Promise.allSettled(
					ready.map(async (p) => {
						try {
							await client.completeChallenge(p.challenge);
							await waitForStatus(client, p.authz, { ...poll, signal });
						} catch (e) {
							throw toAcmeError(e, {
								...scope,
								operation: `${p.challenge.type} validation of ${p.authz.identifier.value}`,
								challenge: p.challenge.type,
								resourceUrl: p.authz.url,
							});
						}
					}),
				),
			);
		} finally {
			for (const outcome of await Promise.allSettled(ready.map((p) => p.cleanup()))) {
				if (outcome.status === "rejected") {
					logger.warn({ issuer, err: String(outcome.reason) }, "challenge cleanup failed");
				}
			}
		}
	}

	return { validateAll };
}
