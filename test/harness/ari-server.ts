/**
 * A small HTTPS server that replays recorded ACME responses, for what Debian's Pebble 2.4 cannot do:
 * ACME Renewal Information (RFC 9773). It serves a directory recorded from Let's Encrypt (URLs rewritten to
 * this server) and, per certID, a recorded renewalInfo response. Every request path is logged.
 *
 *   const ari = await startAriServer({ renewalInfo: { [certId]: recordedWindow(start, end) } });
 *   // issuer config: directory_url: ari.directoryUrl, ca_file: ari.caFile
 *   await ari.stop();
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { makeHttpsCertificate } from "./https-cert.js";

export interface RecordedResponse {
	status: number;
	headers?: Record<string, string>;
	body: string;
}

/** Let's Encrypt's production directory as served in 2025, paths kept, origin replaced by `base`. */
export function recordedLetsEncryptDirectory(base: string, withRenewalInfo: boolean): RecordedResponse {
	const directory: Record<string, unknown> = {
		keyChange: `${base}/acme/key-change`,
		meta: {
			caaIdentities: ["letsencrypt.org"],
			profiles: { classic: "https://letsencrypt.org/docs/profiles#classic" },
			termsOfService: "https://letsencrypt.org/documents/LE-SA-v1.5-February-24-2025.pdf",
			website: "https://letsencrypt.org",
		},
		newAccount: `${base}/acme/new-acct`,
		newNonce: `${base}/acme/new-nonce`,
		newOrder: `${base}/acme/new-order`,
		...(withRenewalInfo ? { renewalInfo: `${base}/draft-ietf-acme-ari-03/renewalInfo` } : {}),
		revokeCert: `${base}/acme/revoke-cert`,
	};
	return {
		status: 200,
		headers: { "content-type": "application/json", "cache-control": "public, max-age=0, no-cache" },
		body: JSON.stringify(directory, null, 2),
	};
}

/** A renewalInfo answer in Let's Encrypt's recorded shape (with its Retry-After of 6 hours). */
export function recordedWindow(start: string, end: string): RecordedResponse {
	return {
		status: 200,
		headers: { "content-type": "application/json", "retry-after": "21600" },
		body: JSON.stringify({ suggestedWindow: { start, end } }),
	};
}

export function recordedProblem(status: number, type: string, detail: string): RecordedResponse {
	return {
		status,
		headers: { "content-type": "application/problem+json" },
		body: JSON.stringify({ type: `urn:ietf:params:acme:error:${type}`, detail, status }),
	};
}

export interface AriServerOptions {
	/** Advertise renewalInfo in the directory (default true). */
	advertise?: boolean;
	/** certID → recorded answer; unknown certIDs get a 404 problem, as Let's Encrypt answers. */
	renewalInfo?: Record<string, RecordedResponse>;
}

export interface AriServer {
	directoryUrl: string;
	caPem: string;
	caFile: string;
	/** Paths requested so far, in order. */
	requests: string[];
	/** Every TLS connection a client opened, in order; a connection stays open until the client closes it. */
	connections: ServerConnection[];
	stop(): Promise<void>;
}

export interface ServerConnection {
	/** How many earlier connections were still open when this one was accepted. */
	openBefore: number;
	open: boolean;
	/** Resolves when the client closed it. */
	closed: Promise<void>;
}

export async function startAriServer(options: AriServerOptions = {}): Promise<AriServer> {
	const dir = await mkdtemp(path.join(tmpdir(), "certificatee-ari-"));
	await makeHttpsCertificate(dir);
	const read = (f: string) => readFile(path.join(dir, f), "utf8");
	const [cert, key, caPem] = [await read("cert.pem"), await read("key.pem"), await read("ca.pem")];
	const requests: string[] = [];
	let base = "";
	const server = https.createServer({ cert, key }, (req, res) => {
		const url = req.url ?? "/";
		requests.push(url);
		const prefix = "/draft-ietf-acme-ari-03/renewalInfo/";
		let answer: RecordedResponse;
		if (url === "/directory") answer = recordedLetsEncryptDirectory(base, options.advertise ?? true);
		else if (url.startsWith(prefix)) {
			answer =
				options.renewalInfo?.[url.slice(prefix.length)] ??
				recordedProblem(404, "malformed", "Certificate not found");
		} else answer = recordedProblem(404, "malformed", "Resource not found");
		res.writeHead(answer.status, answer.headers).end(answer.body);
	});
	// Idle connections are never closed by this side, so a client that leaks its pool leaves them open.
	server.keepAliveTimeout = 0;
	const connections: ServerConnection[] = [];
	server.on("secureConnection", (socket) => {
		const connection: ServerConnection = {
			openBefore: connections.filter((c) => c.open).length,
			open: true,
			closed: new Promise((resolve) =>
				socket.once("close", () => {
					connection.open = false;
					resolve();
				}),
			),
		};
		connections.push(connection);
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	base = `https://localhost:${(server.address() as AddressInfo).port}`;
	return {
		directoryUrl: `${base}/directory`,
		caPem,
		caFile: path.join(dir, "ca.pem"),
		requests,
		connections,
		async stop() {
			server.closeAllConnections();
			await new Promise((r) => server.close(r));
			await rm(dir, { recursive: true, force: true });
		},
	};
}
