/**
 * What every step of an ACME issuer shares, built once from its settings: the files it reads (ca_file, the EAB
 * key), its HTTP-01 responder and challenge solver, its connection pool and CA session, and its clients.
 */
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import acme from "acme-client";
import { Agent } from "undici";
import { secretFileExposure } from "../../base/secret-file.js";
import type { Secret } from "../../certificates/types.js";
import { CertificateeError, exposedSecret } from "../../errors.js";
import type { StateStore } from "../../store/types.js";
import type { ChallengeMaps } from "../types.js";
import { type AccountStore, storedAccount } from "./account.js";
import { type ChallengeSolver, createChallengeSolver } from "./challenges.js";
import { createDnsHook, type DnsHook } from "./dns01.js";
import { createHttp01Responder, type Http01Responder } from "./http01.js";
import { createHttp01MapResponder } from "./http01-map.js";
import type { PollOptions } from "./poll.js";
import { createRfc2136Publisher, readTsigSecret } from "./rfc2136.js";
import { type AcmeSourceConfig, DEFAULT_HTTP01_LISTEN } from "./schema.js";
import { accountSigner, attachSession, type CaSession, createCaSession } from "./session.js";
import type { TransportContext, TransportOptions } from "./transport.js";

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

/** What every step of the issuer shares: its settings, its connection pool, its challenge solver. */
export interface IssuerContext {
	config: AcmeSourceConfig;
	directoryUrl: string;
	logger: AcmeLogger;
	store: AccountStore;
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

/** Reads the issuer's files (ca_file, the EAB key), and builds its solver, connection pool and clients. */
export function issuerContext(config: AcmeSourceConfig, deps: AcmeIssuerDeps): IssuerContext {
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
