/**
 * acme-client's HttpClient (the JWS and nonce layer), replaced by one that shares what an issuer's orders
 * have in common.
 *
 * acme-client 5.4 builds a new HttpClient per Client, and each one fetches the directory again, HEADs
 * newNonce before every signed request (Pebble answers that HEAD with `Connection: close`, so every request
 * also cost a new TLS connection), and signs with the PEM account key, which OpenSSL parses anew for every
 * signature. Here, per issuer: the directory is fetched once (refreshed daily, like acme-client), every
 * response's Replay-Nonce is kept for the next request (RFC 8555 §7.2), and per account key: one KeyObject
 * and one JWK for all orders. The wire format is acme-client's: its AcmeApi and Client call the same methods
 * (`signedRequest`, `createSignedBody`, `getResourceUrl`, `getJwk`, ...) on this object instead.
 */
import { constants, createHmac, createPrivateKey, createPublicKey, type KeyObject, sign } from "node:crypto";
import type { Client } from "acme-client";
import type { Secret } from "../../certificates/types.js";
import { CertificateeError } from "../../errors.js";
import {
	type AcmeHttpResponse,
	acmeRequest,
	type TransportContext,
	type TransportOptions,
} from "./transport.js";

type Jwk = Record<string, string>;

/** An account key, parsed once: its KeyObject, its JWK (members sorted, RFC 7638) and JWS algorithm. */
export interface AccountSigner {
	readonly key: KeyObject;
	readonly jwk: Jwk;
	readonly alg: "RS256" | "ES256" | "ES384" | "ES512";
	readonly hash: "SHA256" | "SHA384" | "SHA512";
}

const signers = new WeakMap<Secret, AccountSigner>();

/** The signer of `key`: parsed on first use, then shared by every order holding the same Secret. */
export function accountSigner(key: Secret): AccountSigner {
	let signer = signers.get(key);
	if (!signer) {
		const privateKey = createPrivateKey(key.reveal());
		const raw = createPublicKey(privateKey).export({ format: "jwk" }) as Jwk;
		const jwk = Object.fromEntries(
			Object.keys(raw)
				.sort()
				.map((k) => [k, raw[k]!]),
		) as Jwk;
		// RFC 7518 §3.1, as acme-client chooses it.
		const [alg, hash] =
			jwk.kty === "EC" && jwk.crv === "P-384"
				? (["ES384", "SHA384"] as const)
				: jwk.kty === "EC" && jwk.crv === "P-521"
					? (["ES512", "SHA512"] as const)
					: jwk.kty === "EC"
						? (["ES256", "SHA256"] as const)
						: (["RS256", "SHA256"] as const);
		signer = { key: privateKey, jwk, alg, hash };
		signers.set(key, signer);
	}
	return signer;
}

/** Nonces older than this are dropped rather than risked (a rejected one costs a badNonce round trip). */
const NONCE_MAX_AGE_MS = 30_000;
const NONCE_POOL_SIZE = 64;
/** acme-client's directory cache lifetime. */
const DIRECTORY_MAX_AGE_MS = 86_400_000;

/** What an issuer's operations share with one CA: its directory and the nonces its responses carried. */
export interface CaSession {
	readonly directoryUrl: string;
	readonly transport: TransportOptions;
	directory(ctx: TransportContext): Promise<Record<string, unknown>>;
	/** A fresh nonce: the newest kept one, or a HEAD newNonce. */
	nonce(ctx: TransportContext): Promise<string>;
	/** Keeps the Replay-Nonce of a response (never one returned by nonce()'s own HEAD). */
	keepNonce(headers: Record<string, string>): void;
}

export function createCaSession(directoryUrl: string, transport: TransportOptions): CaSession {
	let directory: { value: Promise<Record<string, unknown>>; signal: AbortSignal; at: number } | undefined;
	const nonces: { value: string; at: number }[] = [];

	async function fetchDirectory(ctx: TransportContext): Promise<Record<string, unknown>> {
		const resp = await acmeRequest(transport, ctx, directoryUrl, "get");
		// acme-client's own checks and messages.
		if (resp.status >= 400) {
			throw new Error(`Attempting to read ACME directory returned error ${resp.status}: ${directoryUrl}`);
		}
		if (!resp.data || typeof resp.data !== "object") {
			throw new Error("Attempting to read ACME directory returned no data");
		}
		return resp.data as Record<string, unknown>;
	}

	const session: CaSession = {
		directoryUrl,
		transport,
		async directory(ctx) {
			for (;;) {
				if (!directory || Date.now() - directory.at > DIRECTORY_MAX_AGE_MS) {
					const value = fetchDirectory(ctx);
					const entry = { value, signal: ctx.signal, at: Date.now() };
					directory = entry;
					value.catch(() => {
						if (directory === entry) directory = undefined; // a failure is not kept
					});
				}
				const shared = directory;
				try {
					return await shared.value;
				} catch (e) {
					// Another operation's fetch was cancelled: this one fetches for itself.
					if (shared.signal === ctx.signal || !shared.signal.aborted || ctx.signal.aborted) throw e;
				}
			}
		},
		async nonce(ctx) {
			const now = Date.now();
			for (let kept = nonces.pop(); kept; kept = nonces.pop()) {
				if (now - kept.at <= NONCE_MAX_AGE_MS) return kept.value;
			}
			const url = await resourceUrl(session, ctx, "newNonce");
			const resp = await acmeRequest(transport, ctx, url, "head");
			const nonce = resp.headers["replay-nonce"];
			if (!nonce) throw new Error("Failed to get nonce from ACME provider");
			return nonce;
		},
		keepNonce(headers) {
			const nonce = headers["replay-nonce"];
			if (!nonce) return;
			nonces.push({ value: nonce, at: Date.now() });
			if (nonces.length > NONCE_POOL_SIZE) nonces.shift();
		},
	};
	return session;
}

async function resourceUrl(session: CaSession, ctx: TransportContext, resource: string): Promise<string> {
	const dir = await session.directory(ctx);
	const url = dir[resource];
	if (typeof url !== "string" || url.length === 0) {
		throw new Error(`Unable to locate API resource URL in ACME directory: "${resource}"`);
	}
	return url;
}

interface SignOptions {
	nonce?: string | null;
	kid?: string | null;
}

interface SignedRequestOptions extends SignOptions {
	includeExternalAccountBinding?: boolean;
}

interface Jws {
	protected: string;
	payload: string;
	signature?: string;
}

const MAX_BAD_NONCE_RETRIES = 5;

/** acme-client 5.4's HttpClient, method for method, over a shared session and signer; one per operation. */
export class SessionHttpClient {
	constructor(
		private readonly session: CaSession,
		private readonly signer: AccountSigner,
		private readonly eab: { kid: string; hmacKey: string } | undefined,
		private readonly ctx: TransportContext,
	) {}

	request(url: string, method: string, opts: { data?: unknown } = {}): Promise<AcmeHttpResponse> {
		return acmeRequest(this.session.transport, this.ctx, url, method, opts);
	}

	getDirectory(): Promise<Record<string, unknown>> {
		return this.session.directory(this.ctx);
	}

	getJwk(): Jwk {
		return this.signer.jwk;
	}

	getNonce(): Promise<string> {
		return this.session.nonce(this.ctx);
	}

	getResourceUrl(resource: string): Promise<string> {
		return resourceUrl(this.session, this.ctx, resource);
	}

	async getMetaField(field: string): Promise<unknown> {
		const meta = (await this.getDirectory()).meta as Record<string, unknown> | undefined;
		return meta && field in meta ? meta[field] : null;
	}

	prepareSignedBody(alg: string, url: string, payload: unknown = null, opts: SignOptions = {}): Jws {
		const header: Record<string, unknown> = { alg, url };
		if (opts.nonce) header.nonce = opts.nonce;
		if (opts.kid) header.kid = opts.kid;
		else header.jwk = this.signer.jwk;
		return {
			payload: payload ? Buffer.from(JSON.stringify(payload)).toString("base64url") : "",
			protected: Buffer.from(JSON.stringify(header)).toString("base64url"),
		};
	}

	createSignedHmacBody(hmacKey: string, url: string, payload: unknown = null, opts: SignOptions = {}): Jws {
		const result = this.prepareSignedBody("HS256", url, payload, opts);
		result.signature = createHmac("SHA256", Buffer.from(hmacKey, "base64"))
			.update(`${result.protected}.${result.payload}`, "utf8")
			.digest("base64url");
		return result;
	}

	createSignedBody(url: string, payload: unknown = null, opts: SignOptions = {}): Jws {
		const { key, alg, hash } = this.signer;
		const result = this.prepareSignedBody(alg, url, payload, opts);
		result.signature = sign(hash, Buffer.from(`${result.protected}.${result.payload}`, "utf8"), {
			key,
			padding: constants.RSA_PKCS1_PADDING,
			dsaEncoding: "ieee-p1363",
		}).toString("base64url");
		return result;
	}

	/** RFC 8555 §6.2; a badNonce is retried with the nonce it carried (§6.5), up to 5 times. */
	async signedRequest(
		url: string,
		payload: Record<string, unknown> | null,
		{ kid = null, nonce = null, includeExternalAccountBinding = false }: SignedRequestOptions = {},
		attempts = 0,
	): Promise<AcmeHttpResponse> {
		const useNonce = nonce ?? (await this.getNonce());
		if (includeExternalAccountBinding && this.eab && payload) {
			payload.externalAccountBinding = this.createSignedHmacBody(this.eab.hmacKey, url, this.signer.jwk, {
				kid: this.eab.kid,
			});
		}
		const data = this.createSignedBody(url, payload, { nonce: useNonce, kid });
		const resp = await this.request(url, "post", { data });
		const problemType = (resp.data as { type?: unknown } | null)?.type;
		if (
			resp.status === 400 &&
			problemType === "urn:ietf:params:acme:error:badNonce" &&
			attempts < MAX_BAD_NONCE_RETRIES
		) {
			const fresh = resp.headers["replay-nonce"] ?? null;
			return this.signedRequest(
				url,
				payload,
				{ kid, nonce: fresh, includeExternalAccountBinding },
				attempts + 1,
			);
		}
		this.session.keepNonce(resp.headers);
		return resp;
	}
}

interface ClientInternals {
	http?: unknown;
	api?: { http?: unknown };
}

/** Routes all of `client`'s HTTP and signing through a SessionHttpClient for this operation. */
export function attachSession(
	client: Client,
	session: CaSession,
	signer: AccountSigner,
	eab: { kid: string; hmacKey: string } | undefined,
	ctx: TransportContext,
): SessionHttpClient {
	const inner = client as unknown as ClientInternals;
	if (!inner.http || !inner.api || !("http" in inner.api)) {
		throw new CertificateeError("INTERNAL", "acme-client internals changed: no HttpClient to replace", {
			hint: "acme-client must be 5.4.x; see src/sources/acme/session.ts",
		});
	}
	const http = new SessionHttpClient(session, signer, eab, ctx);
	inner.http = http;
	inner.api.http = http;
	return http;
}
