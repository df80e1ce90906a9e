/**
 * An HTTPS pass-through in front of a real Pebble, on loopback, that records what the ACME client sends
 * (the decoded JWS payload of each newOrder) and can advertise ARI (`renewalInfo`, answered 404) in the
 * directory, which Pebble 2.4 lacks. Pebble builds every URL from the request's Host, so forwarding the Host
 * unchanged keeps all later requests (and the JWS `url` checks) going through here.
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

export interface AcmeObserver {
	directoryUrl: string;
	caFile: string;
	/** Decoded payloads of the newOrder requests seen, in order. */
	newOrders: Record<string, unknown>[];
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
	options: { advertiseAri?: boolean } = {},
): Promise<AcmeObserver> {
	const dir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-observer-"));
	await makeHttpsCertificate(dir);
	const upstream = new URL(pebble.directoryUrl);
	const agent = new Agent({ connect: { ca: pebble.caPem } });
	const newOrders: Record<string, unknown>[] = [];
	const posts: AcmeObserver["posts"] = [];
	let newOrderPath: string | undefined;
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
				if (req.method === "POST" && url === newOrderPath) {
					const jws = JSON.parse(data.toString()) as { payload: string };
					newOrders.push(JSON.parse(Buffer.from(jws.payload, "base64url").toString()));
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
					if (options.advertiseAri) directory.renewalInfo = `https://${req.headers.host}/renewal-info`;
					out = Buffer.from(JSON.stringify(directory));
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
		posts,
		async close() {
			server.closeAllConnections();
			await new Promise((resolve) => server.close(resolve));
			await agent.close();
			await rm(dir, { recursive: true, force: true });
		},
	};
}
