/**
 * An HTTPS pass-through in front of a real Pebble, on loopback, that records what the ACME client sends
 * (the decoded JWS payload of each newOrder) and models what Pebble 2.4 lacks: it can advertise ARI
 * (`renewalInfo`, answered 404) and ACME profiles (draft-ietf-acme-profiles). Pebble builds every URL from the
 * request's Host, so forwarding the Host unchanged keeps all later requests (and the JWS `url` checks) going
 * through here.
 *
 * Profiles, as the draft and Let's Encrypt describe them (docs/testing.md, "What the ACME pass-through
 * models"): the directory gains `meta.profiles`; a newOrder whose `profile` is not one of them is answered by
 * the proxy itself, 400 with the draft's problem `urn:ietf:params:acme:error:invalidProfile` (a `profile`
 * that is not a string is `malformed`), with a fresh Replay-Nonce from Pebble; any other newOrder goes to
 * Pebble (which ignores the field) and every order object answered for it afterwards (newOrder, order,
 * finalize) carries `profile`. The lifetime is not modelled per profile: Pebble issues every certificate with
 * its one `certificateValidityPeriod`, so a test of `shortlived` starts Pebble with 160 h
 * (SHORTLIVED_SECONDS).
 *
 *   const obs = await startAcmeObserver(pebble, { advertiseAri: true });
 *   // configure the issuer with directory_url: obs.directoryUrl, ca_file: obs.caFile
 *   obs.newOrders // [{ identifiers: [...], replaces: "..." }, ...]
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Agent, request } from "undici";
import { makeHttpsCertificate } from "./https-cert.js";
import type { PebbleHandle } from "./pebble.js";

/** Let's Encrypt's profiles as its directory lists them (2025), and `shortlived`'s lifetime: 160 hours. */
export const LETS_ENCRYPT_PROFILES: Record<string, string> = {
	classic: "https://letsencrypt.org/docs/profiles#classic",
	shortlived: "https://letsencrypt.org/docs/profiles#shortlived",
	tlsserver: "https://letsencrypt.org/docs/profiles#tlsserver",
};
export const SHORTLIVED_SECONDS = 160 * 3600;

export interface AcmeObserverOptions {
	advertiseAri?: boolean;
	/** Model ACME profiles with this `meta.profiles` (e.g. LETS_ENCRYPT_PROFILES); absent: Pebble's own (none). */
	profiles?: Record<string, string>;
	/** Listed profiles refused at newOrder all the same (invalidProfile), as Let's Encrypt refused `shortlived` to
	 * accounts not on its allowlist before it was generally available. */
	refuse?: string[];
}

export interface AcmeObserver {
	directoryUrl: string;
	caFile: string;
	/** Decoded payloads of the newOrder requests seen, in order. */
	newOrders: Record<string, unknown>[];
	/** Orders the proxy refused itself (an unknown profile): the payload and the problem answered. */
	refused: { payload: Record<string, unknown>; problem: Record<string, unknown> }[];
	/** Every POST: its path, decoded payload ("" for POST-as-GET), Pebble's status and response body. */
	posts: { path: string; payload: unknown; status: number; response: string }[];
	close(): Promise<void>;
}

function body(req: IncomingMessage): Promise<Buffer> {
	return new Promise((resolve, reject) => {
		const chunks: Buffer[] = [];
		req.on("data", (c: Buffer) => chunks.push(c));
		req.on("end", () => resolve(Buffer.concat(chunks)));
		req.on("error", reject);
	});
}

export async function startAcmeObserver(
	pebble: PebbleHandle,
	options: AcmeObserverOptions = {},
): Promise<AcmeObserver> {
	const dir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-observer-"));
	await makeHttpsCertificate(dir);
	const upstream = new URL(pebble.directoryUrl);
	const agent = new Agent({ connect: { ca: pebble.caPem } });
	const newOrders: Record<string, unknown>[] = [];
	const posts: AcmeObserver["posts"] = [];
	const refused: AcmeObserver["refused"] = [];
	let newOrderPath: string | undefined;
	let newNonceUrl: string | undefined;
	/** Order and finalize paths → the profile their order was created with. */
	const orderProfiles = new Map<string, string>();
	const profiles = options.profiles;
	const freshNonce = async (): Promise<string> => {
		// Pebble's URLs name this proxy (its Host); the nonce is asked of Pebble itself.
		const nonceUrl = new URL(new URL(newNonceUrl ?? "/nonce-plz", upstream).pathname, upstream);
		const r = await request(nonceUrl, { method: "HEAD", dispatcher: agent });
		await r.body.dump();
		return String(r.headers["replay-nonce"] ?? "");
	};
	const server = createServer(
		{ cert: await readFile(path.join(dir, "cert.pem")), key: await readFile(path.join(dir, "key.pem")) },
		(req, res) => {
			void (async () => {
				const data = await body(req);
				const url = req.url ?? "/";
				if (url.startsWith("/renewal-info/")) {
					res.writeHead(404).end();
					return;
				}
				let orderProfile: string | undefined;
				if (req.method === "POST" && url === newOrderPath) {
					const jws = JSON.parse(data.toString()) as { payload: string };
					const payload = JSON.parse(Buffer.from(jws.payload, "base64url").toString()) as Record<
						string,
						unknown
					>;
					newOrders.push(payload);
					if (profiles && payload.profile !== undefined) {
						const problem = profileProblem(payload.profile, profiles, options.refuse ?? []);
						if (problem) {
							refused.push({ payload, problem });
							res
								.writeHead(400, {
									"content-type": "application/problem+json",
									"replay-nonce": await freshNonce(),
								})
								.end(JSON.stringify(problem));
							return;
						}
						orderProfile = String(payload.profile);
					}
				}
				const headers: Record<string, string> = {};
				for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers[k] = v;
				const r = await request(new URL(url, upstream), {
					method: req.method as "GET",
					headers,
					...(data.length > 0 ? { body: data } : {}),
					dispatcher: agent,
				});
				let out = Buffer.from(await r.body.arrayBuffer());
				const outHeaders: Record<string, string | string[]> = {};
				for (const [k, v] of Object.entries(r.headers)) if (v !== undefined) outHeaders[k] = v;
				if (url === upstream.pathname && req.method === "GET") {
					const directory = JSON.parse(out.toString()) as Record<string, unknown>;
					newOrderPath = new URL(String(directory.newOrder)).pathname;
					newNonceUrl = String(directory.newNonce);
					if (options.advertiseAri) directory.renewalInfo = `https://${req.headers.host}/renewal-info`;
					if (profiles) directory.meta = { ...(directory.meta as object), profiles };
					out = Buffer.from(JSON.stringify(directory));
				}
				if (orderProfile !== undefined && r.statusCode === 201) {
					const created = JSON.parse(out.toString()) as { finalize?: string };
					const location = r.headers.location;
					if (typeof location === "string") orderProfiles.set(new URL(location).pathname, orderProfile);
					if (created.finalize) orderProfiles.set(new URL(created.finalize).pathname, orderProfile);
				}
				const echoed = orderProfile ?? orderProfiles.get(url);
				if (echoed !== undefined && r.statusCode < 300) {
					out = Buffer.from(JSON.stringify({ ...(JSON.parse(out.toString()) as object), profile: echoed }));
				}
				if (req.method === "POST") {
					const raw = Buffer.from((JSON.parse(data.toString()) as { payload: string }).payload, "base64url");
					const text = raw.toString();
					posts.push({
						path: url,
						payload: text === "" ? "" : JSON.parse(text),
						status: r.statusCode,
						response: out.toString(),
					});
				}
				delete outHeaders["content-length"];
				delete outHeaders["transfer-encoding"];
				res.writeHead(r.statusCode, outHeaders).end(out);
			})().catch((e: unknown) => res.writeHead(502).end(String(e)));
		},
	);
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	const port = (server.address() as AddressInfo).port;
	return {
		directoryUrl: `https://127.0.0.1:${port}${upstream.pathname}`,
		caFile: path.join(dir, "ca.pem"),
		newOrders,
		refused,
		posts,
		async close() {
			server.closeAllConnections();
			await new Promise((resolve) => server.close(resolve));
			await agent.close();
			await rm(dir, { recursive: true, force: true });
		},
	};
}

/** The draft's answer to a newOrder `profile` the CA does not offer (§4), or undefined when it offers it. */
function profileProblem(
	profile: unknown,
	offered: Record<string, string>,
	refuse: readonly string[],
): Record<string, unknown> | undefined {
	if (typeof profile !== "string") {
		return { type: "urn:ietf:params:acme:error:malformed", detail: "profile must be a string", status: 400 };
	}
	if (refuse.includes(profile)) {
		return {
			type: "urn:ietf:params:acme:error:invalidProfile",
			detail: `Account is not allowed to use profile "${profile}"`,
			status: 400,
		};
	}
	if (Object.hasOwn(offered, profile)) return undefined;
	return {
		type: "urn:ietf:params:acme:error:invalidProfile",
		detail: `Profile "${profile}" is not recognised; available profiles: ${Object.keys(offered).join(", ")}`,
		status: 400,
	};
}
