/**
 * The ACME issuer (`type: acme`): orders certificates from an ACME CA with acme-client, answering HTTP-01
 * with the built-in responder or HAProxy maps on a fleet, and DNS-01 through RFC 2136 updates or the
 * operator's hook. One
 * account per issuer, kept in the state store and reused; a new private key per issuance; at most
 * `concurrency` orders in flight.
 */
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { createSecureContext } from "node:tls";
import acme from "acme-client";
import pLimit from "p-limit";
import { Agent } from "undici";
import { secretFileExposure } from "../../base/secret-file.js";
import { encodePem, splitPem } from "../../certificates/pem.js";
import { Secret } from "../../certificates/types.js";
import { CertificateeError, exposedSecret } from "../../errors.js";
import type { StateStore } from "../../store/types.js";
import {
	type ChallengeMaps,
	type IssuedPem,
	type IssueRequest,
	type Issuer,
	REVOCATION_REASONS,
	type RenewalWindow,
	type RevocationReason,
} from "../types.js";
import { type AccountStore, storedAccount } from "./account.js";
import { ariCertId, parseRenewalInfo } from "./ari.js";
import { type ChallengeSolver, createChallengeSolver } from "./challenges.js";
import { createCsr } from "./csr.js";
import { createDnsHook, type DnsHook } from "./dns01.js";
import { createHttp01Responder, type Http01Responder } from "./http01.js";
import { createHttp01MapResponder } from "./http01-map.js";
import { createCertificateKey } from "./keys.js";
import { type PollOptions, waitForStatus } from "./poll.js";
import { describeProblem, type ProblemScope, toAcmeError } from "./problem.js";
import { directoryProfiles, unknownProfile } from "./profiles.js";
import { createRfc2136Publisher, readTsigSecret } from "./rfc2136.js";
import { type AcmeSourceConfig, DEFAULT_HTTP01_LISTEN } from "./schema.js";
import {
	accountSigner,
	attachSession,
	type CaSession,
	createCaSession,
	type SessionHttpClient,
} from "./session.js";
import { acmeRequest, type TransportContext, type TransportOptions } from "./transport.js";

export { type AccountStore, type StoredAccount, storedAccount } from "./account.js";
export { ariCertId } from "./ari.js";
export { directoryProfiles, unknownProfile } from "./profiles.js";
export { type AcmeSourceConfig, acmeSourceSchema } from "./schema.js";

/** pino-compatible. */
export interface AcmeLogger {
	info(fields: object, message: string): void;
	warn(fields: object, message: string): void;
}

export interface AcmeIssuerDeps {
	/** The state store; the account is its `accounts/<issuer name>` record. */
	store: StateStore;
	logger?: AcmeLogger;
	/** The HAProxy nodes for `http01: { via: haproxy-map }`; required by that setting. */
	challengeMaps?: ChallengeMaps;
}

/** An Issuer that holds a connection pool: close() it when the issuer is dropped. */
export interface AcmeIssuer extends Issuer {
	renewalWindow(certPem: string, signal: AbortSignal): Promise<RenewalWindow | undefined>;
	/** RFC 8555 §7.3.5 keyChange: a new account key, stored before the old one is dropped. Returns the account URL. */
	rolloverKey(signal: AbortSignal): Promise<string>;
	close(): Promise<void>;
}

interface Account {
	key: Secret;
	url: string;
}

const silent: AcmeLogger = { info() {}, warn() {} };

function readConfigFile(file: string, field: string, secret: boolean): string {
	try {
		const text = readFileSync(file, "utf8").trim();
		const exposed = secret ? secretFileExposure(file, field) : undefined;
		if (exposed !== undefined) throw exposedSecret(file, field, exposed);
		return text;
	} catch (e) {
		if (e instanceof CertificateeError) throw e;
		throw new CertificateeError(
			secret ? "CONFIG_SECRET_UNREADABLE" : "CONFIG_INVALID",
			`cannot read ${field} ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
			{
				context: { file, field },
				cause: e,
			},
		);
	}
}

/** A stored account without a recorded contact predates this field: push the configured one once. */
function sameContact(stored: readonly string[] | undefined, wanted: readonly string[]): boolean {
	return stored !== undefined && stored.length === wanted.length && stored.every((c, i) => c === wanted[i]);
}

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

/** What every step of the issuer shares: its settings, its connection pool, its challenge solver. */
interface IssuerContext {
	config: AcmeSourceConfig;
	directoryUrl: string;
	logger: AcmeLogger;
	store: AccountStore;
	http01Listen: string | undefined;
	/** Where HTTP-01 answers go (the built-in responder or HAProxy maps); closed with the issuer. */
	responder: Http01Responder | undefined;
	solver: ChallengeSolver;
	/** The issuer's own connection pool (trust from ca_file); closed with the issuer. */
	agent: Agent;
	transport: TransportOptions;
	/** The directory and nonces shared by all of the issuer's operations. */
	session: CaSession;
	/** How authorizations and orders are polled (poll.ts). */
	poll: Omit<PollOptions, "signal">;
	/** A client for one operation; its HTTP and signing go through the shared session (session.ts). */
	newClient(key: Secret, accountUrl: string | undefined, ctx: TransportContext): acme.Client;
}

/** The account shared by every operation, and a way to swap it after a key rollover. */
interface AccountHolder {
	ensure(signal: AbortSignal): Promise<Account>;
	replace(account: Account): void;
}

export function createAcmeIssuer(config: AcmeSourceConfig, deps: AcmeIssuerDeps): AcmeIssuer {
	const ctx = issuerContext(config, deps);
	const accounts = accountHolder(ctx);
	const limit = pLimit(config.concurrency);
	return {
		name: config.name,
		issue: (request, signal) => limit(() => issueCertificate(ctx, accounts, request, signal)),
		renewalWindow: (certPem, signal) => fetchRenewalWindow(ctx, certPem, signal),
		revoke: (certPem, reason, signal) => revokeCertificate(ctx, accounts, certPem, reason, signal),
		rolloverKey: (signal) => rolloverAccountKey(ctx, accounts, signal),
		...(ctx.responder?.prepare ? { prepare: (signal: AbortSignal) => ctx.responder!.prepare!(signal) } : {}),
		close: async () => {
			await Promise.all([ctx.agent.close(), ctx.responder?.close?.()]);
		},
	};
}

/** Reads the issuer's files (ca_file, the EAB key), and builds its solver, connection pool and clients. */
function issuerContext(config: AcmeSourceConfig, deps: AcmeIssuerDeps): IssuerContext {
	const directoryUrl = config.directory_url;
	const logger = deps.logger ?? silent;
	const store = storedAccount(deps.store, config.name);
	const ca = config.ca_file ? readConfigFile(config.ca_file, "ca_file", false) : undefined;
	const eab = config.eab
		? {
				kid: config.eab.kid,
				hmacKey: config.eab.hmac_key ?? readConfigFile(config.eab.hmac_key_file!, "eab.hmac_key_file", true),
			}
		: undefined;
	const responder = http01Responder(config, deps, logger);
	const http01Listen = responder?.address;
	const solver = challengeSolver(config, responder, logger);
	// One TLS context for every connection (tls.connect would build one per connection from `ca`).
	const secureContext = createSecureContext(ca ? { ca } : {});
	const agent = new Agent({ connect: { secureContext }, keepAliveTimeout: 10_000 });
	const transport: TransportOptions = {
		dispatcher: agent,
		retries: config.http_retries,
		requestTimeoutMs: 30_000,
		retryDelayMs: 500,
	};
	const session = createCaSession(directoryUrl, transport);
	const newClient = (key: Secret, accountUrl: string | undefined, tctx: TransportContext): acme.Client => {
		const client = new acme.Client({
			directoryUrl,
			accountKey: key.reveal(),
			...(accountUrl ? { accountUrl } : {}),
			...(eab ? { externalAccountBinding: eab } : {}),
		});
		attachSession(client, session, accountSigner(key), eab, tctx);
		return client;
	};
	return {
		config,
		directoryUrl,
		logger,
		store,
		http01Listen,
		responder,
		solver,
		agent,
		transport,
		session,
		poll: pollOptions(config),
		newClient,
	};
}

/** The built-in responder (default when DNS-01 is not configured), HAProxy maps, or none (DNS-01 only). */
function http01Responder(
	config: AcmeSourceConfig,
	deps: AcmeIssuerDeps,
	logger: AcmeLogger,
): Http01Responder | undefined {
	const http01 = config.http01;
	if (http01?.via === "haproxy-map") {
		const challengeMaps = deps.challengeMaps;
		return createHttp01MapResponder({
			issuer: config.name,
			map: http01.map,
			targets: http01.targets,
			nodes: () => {
				if (challengeMaps) return challengeMaps(http01.targets, http01.map);
				throw new CertificateeError(
					"INTERNAL",
					`issuer ${config.name}: http01 via haproxy-map was built without the configured targets`,
					{ context: { field: "http01.targets" } },
				);
			},
			verifyTimeoutMs: http01.verify_timeout,
			logger,
		});
	}
	const dns01 = config.dns_hook !== undefined || config.dns01 !== undefined;
	const listen = http01?.listen ?? (dns01 ? undefined : DEFAULT_HTTP01_LISTEN);
	return listen ? createHttp01Responder(listen) : undefined;
}

/** RFC 2136 updates or the operator's hook. The TSIG secret is read now: a bad file stops the start. */
function dnsPublisher(config: AcmeSourceConfig): DnsHook | undefined {
	const rfc2136 = config.dns01?.rfc2136;
	if (rfc2136) return createRfc2136Publisher(rfc2136, readTsigSecret(rfc2136.tsig_secret_file));
	return config.dns_hook ? createDnsHook(config.dns_hook, config.dns_hook_timeout) : undefined;
}

/** acme-client's backoffAttempts as this issuer always set it. */
const POLL_ATTEMPTS = 30;

function pollOptions(config: AcmeSourceConfig): Omit<PollOptions, "signal"> {
	return { intervalMs: config.poll_interval, attempts: POLL_ATTEMPTS };
}

function challengeSolver(
	config: AcmeSourceConfig,
	responder: Http01Responder | undefined,
	logger: AcmeLogger,
): ChallengeSolver {
	return createChallengeSolver({
		issuer: config.name,
		directoryUrl: config.directory_url,
		responder,
		dnsHook: dnsPublisher(config),
		dnsHookTimeoutMs: config.dns_hook_timeout,
		propagationWaitMs: config.dns_propagation_wait,
		poll: pollOptions(config),
		logger,
	});
}

/**
 * One registration shared by concurrent operations; it has its own deadline, so one caller giving up
 * does not fail the others (each caller stops waiting on its own signal). A failure is not kept.
 */
function accountHolder(ctx: IssuerContext): AccountHolder {
	let account: Promise<Account> | undefined;
	return {
		ensure(signal) {
			account ??= registerAccount(ctx, AbortSignal.timeout(ctx.config.timeout)).catch((e: unknown) => {
				account = undefined;
				throw e;
			});
			const shared = account;
			return new Promise<Account>((resolve, reject) => {
				const onAbort = () => reject(signal.reason);
				if (signal.aborted) return onAbort();
				signal.addEventListener("abort", onAbort, { once: true });
				shared.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
			});
		},
		replace(next) {
			account = Promise.resolve(next);
		},
	};
}

/** The stored account (its contact brought up to date), or a new one registered with a key stored first. */
async function registerAccount(ictx: IssuerContext, signal: AbortSignal): Promise<Account> {
	const { config, directoryUrl, store, logger, newClient } = ictx;
	const ctx: TransportContext = { signal, problems: [] };
	try {
		const stored = await store.load();
		const contact = config.email ? [`mailto:${config.email}`] : [];
		if (stored?.accountUrl && stored.directoryUrl === directoryUrl) {
			if (!sameContact(stored.contact, contact)) {
				// The operator changed `email`: the CA's expiry and policy mail must follow (RFC 8555 §7.3.2).
				await newClient(stored.key, stored.accountUrl, ctx).updateAccount({ contact });
				await store.save({ ...stored, contact });
				logger.info(
					{ issuer: config.name, account: stored.accountUrl, contact },
					"ACME account contact updated",
				);
			}
			return { key: stored.key, url: stored.accountUrl };
		}
		const key = stored?.key ?? new Secret((await acme.crypto.createPrivateEcdsaKey("P-256")).toString());
		// The key is on disk before the CA knows it: after a crash, the same key finds the same account.
		if (!stored) await store.save({ key });
		const client = newClient(key, undefined, ctx);
		await client.createAccount({
			termsOfServiceAgreed: config.agree_tos,
			...(contact.length > 0 ? { contact } : {}),
		});
		const url = client.getAccountUrl();
		await store.save({ key, directoryUrl, accountUrl: url, contact });
		logger.info({ issuer: config.name, directory: directoryUrl, account: url }, "ACME account registered");
		return { key, url };
	} catch (e) {
		throw toAcmeError(e, {
			operation: "account registration",
			endpoint: directoryUrl,
			problems: ctx.problems,
			signal,
		});
	}
}

/** One order from account to downloaded chain; `scope.operation` names the step a failure happened in. */
async function issueCertificate(
	ictx: IssuerContext,
	accounts: AccountHolder,
	request: IssueRequest,
	outer: AbortSignal,
): Promise<IssuedPem> {
	const { config, directoryUrl, http01Listen } = ictx;
	const signal = AbortSignal.any([outer, AbortSignal.timeout(config.timeout)]);
	const ctx: TransportContext = { signal, problems: [] };
	const domains = normaliseDomains(request.domains);
	const scope: ProblemScope = {
		certificate: request.certificate,
		operation: "account registration",
		endpoint: directoryUrl,
		...(http01Listen ? { http01: http01Listen } : {}),
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

/** The CA's suggested renewal window (ARI), or undefined when it has no renewalInfo or no window for it. */
async function fetchRenewalWindow(
	{ transport, directoryUrl }: IssuerContext,
	certPem: string,
	signal: AbortSignal,
): Promise<RenewalWindow | undefined> {
	const ctx: TransportContext = { signal, problems: [] };
	const operation = "renewal info";
	try {
		const dir = await acmeRequest(transport, ctx, directoryUrl, "get");
		const base = (dir.data as { renewalInfo?: unknown } | null)?.renewalInfo;
		if (dir.status !== 200) {
			throw new CertificateeError(
				"ACME_ERROR",
				`ACME directory ${directoryUrl} answered HTTP ${dir.status}`,
				{
					context: { endpoint: directoryUrl, operation, status: dir.status },
					retryable: true,
				},
			);
		}
		if (typeof base !== "string") return undefined;
		const url = `${base.replace(/\/+$/, "")}/${ariCertId(certPem)}`;
		const res = await acmeRequest(transport, ctx, url, "get");
		if (res.status === 404) return undefined;
		if (res.status !== 200) {
			const problem = ctx.problems.at(-1);
			throw new CertificateeError(
				"ACME_ERROR",
				`renewalInfo ${url} answered HTTP ${res.status}${problem ? `: ${describeProblem(problem)}` : ""}`,
				{
					context: {
						endpoint: url,
						operation,
						status: res.status,
						...(problem ? { problem: problem.type } : {}),
					},
					retryable: true,
				},
			);
		}
		return parseRenewalInfo(url, res.data);
	} catch (e) {
		throw toAcmeError(e, { operation, endpoint: directoryUrl, problems: ctx.problems, signal });
	}
}

async function revokeCertificate(
	ictx: IssuerContext,
	accounts: AccountHolder,
	certPem: string,
	reason: RevocationReason,
	outer: AbortSignal,
): Promise<void> {
	const signal = AbortSignal.any([outer, AbortSignal.timeout(ictx.config.timeout)]);
	const ctx: TransportContext = { signal, problems: [] };
	try {
		const { key, url } = await accounts.ensure(signal);
		await ictx.newClient(key, url, ctx).revokeCertificate(certPem, { reason: REVOCATION_REASONS[reason] });
		ictx.logger.info({ issuer: ictx.config.name, reason }, "certificate revoked");
	} catch (e) {
		throw toAcmeError(e, {
			operation: "revocation",
			endpoint: ictx.directoryUrl,
			problems: ctx.problems,
			signal,
		});
	}
}

/** RFC 8555 §7.3.5 keyChange; the new key is stored before the CA switches, so a crash cannot lose it. */
async function rolloverAccountKey(
	ictx: IssuerContext,
	accounts: AccountHolder,
	outer: AbortSignal,
): Promise<string> {
	const { config, store, newClient } = ictx;
	const signal = AbortSignal.any([outer, AbortSignal.timeout(config.timeout)]);
	const ctx: TransportContext = { signal, problems: [] };
	try {
		const { key, url } = await accounts.ensure(signal);
		const stored = await store.load();
		const nextKey = new Secret((await acme.crypto.createPrivateEcdsaKey("P-256")).toString());
		// On disk first: if the CA switches and we crash before the swap below, the new key is not lost.
		await store.save({ ...stored, key, nextKey });
		const oldClient = newClient(key, url, ctx);
		const nextClient = newClient(nextKey, url, ctx);
		// acme-client's updateAccountKey builds an HTTP client that bypasses our transport (trust, retries,
		// timeouts), so the two JWS are built here with the session's signing code instead.
		const next = internals(nextClient);
		const keyChangeUrl = await next.http.getResourceUrl("keyChange");
		const body = next.http.createSignedBody(keyChangeUrl, {
			account: url,
			oldKey: internals(oldClient).http.getJwk(),
		});
		await internals(oldClient).api.updateAccountKey(body);
		const { nextKey: _n, ...rest } = { ...stored, key, nextKey };
		await store.save({ ...rest, key: nextKey });
		accounts.replace({ key: nextKey, url });
		ictx.logger.info({ issuer: config.name, account: url }, "ACME account key rolled over");
		return url;
	} catch (e) {
		throw toAcmeError(e, {
			operation: "key rollover",
			endpoint: ictx.directoryUrl,
			problems: ctx.problems,
			signal,
		});
	}
}

interface ClientInternals {
	http: SessionHttpClient;
	api: { updateAccountKey(body: object): Promise<unknown> };
}

/** The session client and acme-client 5.4's AcmeApi, for keyChange (see rolloverKey). */
function internals(client: acme.Client): ClientInternals {
	return client as unknown as ClientInternals;
}
