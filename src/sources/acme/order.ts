/** One certificate order, from the account to the downloaded chain: newOrder, authorizations, finalize, download. */
import { isIP } from "node:net";
import type acme from "acme-client";
import { encodePem, splitPem } from "../../certificates/pem.js";
import { CertificateeError } from "../../errors.js";
import type { IssuedPem, IssueRequest } from "../types.js";
import { ariCertId } from "./ari.js";
import { createCsr } from "./csr.js";
import type { IssuerContext } from "./issuer-context.js";
import { createCertificateKey } from "./keys.js";
import { waitForStatus } from "./poll.js";
import { type ProblemScope, toAcmeError } from "./problem.js";
import { directoryProfiles, unknownProfile } from "./profiles.js";
import type { AccountHolder } from "./registration.js";
import type { TransportContext } from "./transport.js";

/** Lowercased, deduplicated, order kept (the first name becomes the CN). */
function normaliseDomains(domains: readonly string[]): string[] {
	return [...new Set(domains.map((d) => d.trim().toLowerCase()).filter((d) => d.length > 0))];
}

/** newOrder's payload: RFC 8555 §7.4, plus `profile` (draft-ietf-acme-profiles §4) and `replaces` (RFC 9773 §5). */
type OrderPayload = Parameters<acme.Client["createOrder"]>[0] & { profile?: string; replaces?: string };

/**
 * newOrder, with `profile` and `replaces` when set. acme-client 5.4 (the latest) has neither field but posts
 * the payload as given, so they go through. A CA that refuses `replaces` (the old certificate was already
 * replaced, or is unknown to it) gets the order without it; `profile` is never dropped.
 */
async function createOrder(
	client: acme.Client,
	identifiers: { type: string; value: string }[],
	replaces: string | undefined,
	profile: string | undefined,
): Promise<acme.Order & { profile?: unknown }> {
	const payload: OrderPayload = { identifiers, ...(profile !== undefined ? { profile } : {}) };
	if (replaces === undefined) return client.createOrder(payload);
	try {
		const replacing: OrderPayload = { ...payload, replaces };
		return await client.createOrder(replacing);
	} catch {
		return client.createOrder(payload);
	}
}

/** One order from account to downloaded chain; `scope.operation` names the step a failure happened in. */
export async function issueCertificate(
	ictx: IssuerContext,
	accounts: AccountHolder,
	request: IssueRequest,
	outer: AbortSignal,
): Promise<IssuedPem> {
	const { config, directoryUrl, responder } = ictx;
	const signal = AbortSignal.any([outer, AbortSignal.timeout(config.timeout)]);
	const ctx: TransportContext = { signal, problems: [] };
	const domains = normaliseDomains(request.domains);
	const scope: ProblemScope = {
		certificate: request.certificate,
		operation: "account registration",
		endpoint: directoryUrl,
		...(responder ? { http01: { address: responder.address, via: responder.via } } : {}),
		problems: ctx.problems,
		signal,
	};
	try {
		signal.throwIfAborted();
		if (domains.length === 0) {
			throw new CertificateeError("ISSUE_FAILED", `certificate ${request.certificate} has no domains`, {
				context: { certificate: request.certificate, field: "domains" },
			});
		}
		const { key, url } = await accounts.ensure(signal);
		const client = ictx.newClient(key, url, ctx);
		scope.operation = "new order";
		const identifiers = domains.map((d) => ({ type: isIP(d) ? "ip" : "dns", value: d }));
		const replaces = request.replaces ? await replacesId(ictx, request.replaces, ctx) : undefined;
		const profile = request.profile ?? config.profile;
		if (profile !== undefined) await checkProfile(ictx, profile, request, scope, ctx);
		const order = await createOrder(client, identifiers, replaces, profile);
		scope.operation = "authorization";
		await ictx.solver.validateAll(client, await client.getAuthorizations(order), scope);
		const issued = await finalizeAndDownload(ictx, client, order, request, domains, scope);
		// The profile the CA says it issued under (the order object's `profile`), else the one asked for.
		const issuedUnder = typeof order.profile === "string" ? order.profile : profile;
		ictx.logger.info(
			{ issuer: config.name, certificate: request.certificate, domains, profile: issuedUnder },
			"certificate issued",
		);
		return issuedUnder !== undefined ? { ...issued, profile: issuedUnder } : issued;
	} catch (e) {
		throw toAcmeError(e, { ...scope });
	}
}

/** A new key and CSR for the validated order, then the chain the CA issued (the preferred one). */
async function finalizeAndDownload(
	{ config, directoryUrl, poll }: IssuerContext,
	client: acme.Client,
	order: acme.Order,
	request: IssueRequest,
	domains: string[],
	scope: ProblemScope,
): Promise<IssuedPem> {
	scope.operation = "finalize";
	const { privateKey, publicKey, keyPem } = await createCertificateKey(request.keyType);
	const first = domains[0]!;
	const csr = createCsr(
		domains,
		first.length <= 64 && !isIP(first) ? first : undefined,
		privateKey,
		publicKey,
	);
	const finalized = await client.finalizeOrder(order, csr);
	const issued =
		finalized.status === "valid"
			? finalized
			: await waitForStatus(client, finalized, { ...poll, signal: scope.signal });
	scope.operation = "certificate download";
	const pem = await client.getCertificate(issued, config.preferred_chain);
	const split = splitPem(String(pem));
	const [certPem, ...chain] = split.ok ? split.blocks.map((b) => encodePem(b.label, b.der)) : [];
	if (!certPem) {
		throw new CertificateeError("ACME_ERROR", `the CA returned no certificate for ${request.certificate}`, {
			context: { endpoint: directoryUrl },
			retryable: true,
		});
	}
	return { certPem: `${certPem.trim()}\n`, chainPem: chain.map((c) => `${c.trim()}\n`).join(""), keyPem };
}

/**
 * A profile the CA's directory does not list is refused before any order (the CA would answer invalidProfile):
 * the error names the profiles it offers. Their names also go into the scope, for the hint of a CA that lists
 * a profile and refuses it anyway (one not open to this account).
 */
async function checkProfile(
	{ config, session, directoryUrl }: IssuerContext,
	profile: string,
	request: IssueRequest,
	scope: ProblemScope,
	ctx: TransportContext,
): Promise<void> {
	const offered = directoryProfiles(await session.directory(ctx));
	scope.profiles = Object.keys(offered ?? {});
	const field = request.profile !== undefined ? "profile" : `sources.${config.name}.profile`;
	const refused = unknownProfile(profile, offered, {
		issuer: config.name,
		certificate: request.certificate,
		endpoint: directoryUrl,
		field,
	});
	if (refused) throw refused;
}

/** The ARI certID of the certificate a new order replaces, when the CA supports ARI (RFC 9773 §5). */
async function replacesId(
	{ session }: IssuerContext,
	certPem: string,
	ctx: TransportContext,
): Promise<string | undefined> {
	try {
		if (typeof (await session.directory(ctx)).renewalInfo !== "string") return undefined;
		return ariCertId(certPem);
	} catch {
		return undefined; // advice only: the order goes ahead without it
	}
}
