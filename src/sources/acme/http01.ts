/**
 * The built-in HTTP-01 responder: answers GET /.well-known/acme-challenge/<token> with the key
 * authorization while a challenge is pending. It listens only while at least one token is published (an
 * HAProxy in front routes the path to it), so an idle issuer holds no port.
 */
import http from "node:http";
import { CertificateeError } from "../../errors.js";

const PATH = /^\/\.well-known\/acme-challenge\/([A-Za-z0-9_-]+)$/;

/** Where HTTP-01 answers are served: the built-in responder here, or HAProxy maps (http01-map.ts). */
export interface Http01Responder {
	/** Serves `token` for `domain` until the returned function is called. */
	publish(
		token: string,
		keyAuthorization: string,
		domain: string,
		signal: AbortSignal,
	): Promise<() => Promise<void>>;
	/** Ends connections the responder holds (HAProxy maps); the built-in one holds none while idle. */
	close?(): Promise<void>;
	/** Clears answers an earlier run left behind (HAProxy maps); the built-in responder has none. */
	prepare?(signal: AbortSignal): Promise<void>;
	readonly address: string;
	/**
	 * How answers are served: `listen`, by the built-in responder on its address; `haproxy-map`, by every HAProxy
	 * node of the named targets, each checked to answer before the CA is asked.
	 */
	readonly via: Http01Via;
}

export type Http01Via = "listen" | "haproxy-map";

function splitAddress(address: string): { host: string; port: number } {
	const i = address.lastIndexOf(":");
	return { host: address.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(address.slice(i + 1)) };
}

export function createHttp01Responder(address: string): Http01Responder {
	const tokens = new Map<string, string>();
	let server: http.Server | undefined;
	// Start and stop are serialised so a publish during a stop waits and starts a fresh server.
	let transition: Promise<void> = Promise.resolve();

	const handler: http.RequestListener = (req, res) => {
		const m = req.method === "GET" || req.method === "HEAD" ? PATH.exec(req.url ?? "") : null;
		const body = m ? tokens.get(m[1]!) : undefined;
		if (body === undefined) {
			res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
			return;
		}
		res.writeHead(200, { "content-type": "application/octet-stream" }).end(body);
	};

	const start = async () => {
		if (server) return;
		const { host, port } = splitAddress(address);
		const s = http.createServer(handler);
		await new Promise<void>((resolve, reject) => {
			s.once("error", reject);
			s.listen(port, host, () => {
				s.off("error", reject);
				resolve();
			});
		}).catch((e: NodeJS.ErrnoException) => {
			throw new CertificateeError(
				"ISSUE_FAILED",
				`HTTP-01 responder cannot listen on ${address}: ${e.code ?? e.message}`,
				{
					context: { field: "http01.listen", endpoint: address },
					hint: "choose a free address for http01.listen (HAProxy routes /.well-known/acme-challenge/ to it)",
					retryable: true,
					cause: e,
				},
			);
		});
		server = s;
	};

	const stopIfIdle = async () => {
		if (!server || tokens.size > 0) return;
		const s = server;
		server = undefined;
		s.closeAllConnections();
		await new Promise<void>((resolve) => s.close(() => resolve()));
	};

	const serialised = (step: () => Promise<void>): Promise<void> => {
		const next = transition.then(step);
		transition = next.catch(() => undefined);
		return next;
	};

	return {
		address,
		via: "listen",
		async publish(token, keyAuthorization) {
			tokens.set(token, keyAuthorization);
			try {
				await serialised(start);
			} catch (e) {
				tokens.delete(token);
				throw e;
			}
			let removed = false;
			return async () => {
				if (removed) return;
				removed = true;
				tokens.delete(token);
				await serialised(stopIfIdle);
			};
		},
	};
}
