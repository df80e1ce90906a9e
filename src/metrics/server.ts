/**
 * The HTTP side of the daemon: / (the fleet page), /status.json (what `status --json` prints, from the last
 * cycle), /metrics, /healthz (the loop is alive), /readyz (configuration loaded and the last cycle observed at
 * least one endpoint of each target). The decisions are in health.ts; the page in page/. With `listen_token`
 * set, everything but the probes needs it (docs/security.md#the-http-listener).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { parseHostPort } from "../base/address.js";
import { CertificateeError } from "../errors.js";
import { type LoopHealth, liveness, readiness } from "./health.js";
import type { Metrics } from "./index.js";
import { PAGE_HEADERS, renderPage } from "./page/layout.js";
import type { StatusDocument } from "./status-view.js";

export interface HealthServer {
	/** The bound address, e.g. 127.0.0.1:9810 (useful with port 0). */
	address: string;
	close(): Promise<void>;
}

/**
 * Caps on what one client can hold (issue 25, finding 11): a monitoring scrape needs one connection and
 * sends its headers at once. Node's defaults let a client hold a connection 60 s per header and any number
 * of them (slowloris, descriptor exhaustion).
 */
export const LISTENER_LIMITS = {
	/** Connections open at once; more are closed on accept. */
	maxConnections: 64,
	/** The whole request head must arrive within this. */
	headersTimeoutMs: 5_000,
	/** The whole request, head and body. */
	requestTimeoutMs: 10_000,
	/** How often Node checks the two timeouts (its default is 30 s, which would let them run that late). */
	checkIntervalMs: 1_000,
} as const;

export interface ListenerOptions {
	/** The clock liveness is judged by (the daemon's; ms since the epoch). */
	now?: () => number;
	/**
	 * `listen_token` of the configuration now (read per request: a reload changes it): when set, the page,
	 * /status.json and /metrics need it; /healthz and /readyz stay open for probes that cannot send one.
	 */
	token?: () => string | undefined;
}

/** Paths that answer without the token: liveness and readiness probes (kubelet, load balancers) send none. */
const OPEN_PATHS = new Set(["/healthz", "/readyz", "/favicon.ico"]);

export async function startHealthServer(
	listen: string,
	metrics: Metrics,
	health: () => LoopHealth,
	/** The status document of the last cycle; undefined until one finished. */
	status: () => StatusDocument | undefined,
	options: ListenerOptions = {},
): Promise<HealthServer> {
	const now = options.now ?? Date.now;
	const view: ListenerView = { metrics, health, status, now, page: cachedPage(health, status, now) };
	const limits = LISTENER_LIMITS;
	const serverOptions = {
		headersTimeout: limits.headersTimeoutMs,
		requestTimeout: limits.requestTimeoutMs,
		connectionsCheckingInterval: limits.checkIntervalMs,
	};
	const server: Server = createServer(serverOptions, (req, res) => {
		const path = (req.url ?? "/").split("?")[0] ?? "/";
		if (req.method !== "GET" && req.method !== "HEAD") {
			res.writeHead(405, { allow: "GET, HEAD" }).end();
			return;
		}
		const token = options.token?.();
		if (token !== undefined && !OPEN_PATHS.has(path) && !authorized(req.headers.authorization, token)) {
			refuseWithoutToken(res);
			return;
		}
		(ROUTES.get(path) ?? notFound)(view, { req, res, token });
	});
	server.maxConnections = limits.maxConnections;
	await bind(server, listen);
	const addr = server.address();
	const address = typeof addr === "object" && addr ? `${addr.address}:${addr.port}` : listen;
	return {
		address,
		close: () => new Promise<void>((resolve) => server.close(() => resolve())),
	};
}

/** What the routes answer from: the daemon's metrics, loop health, last status, clock and rendered page. */
interface ListenerView {
	metrics: Metrics;
	health: () => LoopHealth;
	status: () => StatusDocument | undefined;
	now: () => number;
	page: () => string;
}

/** One request that passed the method and token checks, with the token configured now (if any). */
interface Exchange {
	req: IncomingMessage;
	res: ServerResponse;
	token: string | undefined;
}

type Route = (view: ListenerView, exchange: Exchange) => void;

/** The page of the last cycle, rendered once per cycle (and refresh period), not per request. */
function cachedPage(
	health: () => LoopHealth,
	status: () => StatusDocument | undefined,
	now: () => number,
): () => string {
	let cached: { doc: StatusDocument | undefined; refresh: number; page: string } | undefined;
	return () => {
		const doc = status();
		const refresh = refreshSeconds(health());
		if (cached === undefined || cached.doc !== doc || cached.refresh !== refresh) {
			cached = { doc, refresh, page: renderPage(doc, { now: new Date(now()), refreshSeconds: refresh }) };
		}
		return cached.page;
	};
}

function refuseWithoutToken(res: ServerResponse): void {
	res
		.writeHead(401, {
			"content-type": "text/plain",
			"cache-control": "no-store",
			// Basic makes a browser ask (any user name, the token as password); scripts send Bearer.
			"www-authenticate": 'Basic realm="certificatee", charset="UTF-8"',
		})
		.end(
			"401: this listener needs its token (listen_token_file): send Authorization: Bearer <token>, or the token as the password of HTTP Basic (any user name)\n",
		);
}

function servePage(view: ListenerView, { req, res }: Exchange): void {
	res.writeHead(200, PAGE_HEADERS).end(req.method === "HEAD" ? undefined : view.page());
}

/** The page has no icon; answering keeps browsers' consoles free of a 404. */
function serveFavicon(_view: ListenerView, { res }: Exchange): void {
	res.writeHead(204, { "cache-control": "max-age=86400" }).end();
}

function serveStatus(view: ListenerView, { res }: Exchange): void {
	const doc = view.status();
	res
		.writeHead(doc ? 200 : 503, { "content-type": "application/json", "cache-control": "no-store" })
		.end(`${JSON.stringify(doc ?? { error: "no cycle has finished yet; try again shortly" }, null, 2)}\n`);
}

function serveMetrics(view: ListenerView, { res }: Exchange): void {
	const { registry } = view.metrics;
	registry
		.metrics()
		.then((body) => res.writeHead(200, { "content-type": registry.contentType }).end(body))
		.catch((e: unknown) => res.writeHead(500).end(String(e)));
}

function serveLiveness(view: ListenerView, { res }: Exchange): void {
	const alive = liveness(view.health(), view.now());
	res
		.writeHead(alive.ok ? 200 : 503, { "content-type": "text/plain" })
		.end(`${alive.ok ? "ok" : "not ok"}: ${alive.reason}\n`);
}

/** Open to probes, but the details (endpoint names, their errors) only with the token when one is set. */
function serveReadiness(view: ListenerView, { req, res, token }: Exchange): void {
	const ready = readiness(view.health());
	const shown =
		token === undefined || authorized(req.headers.authorization, token)
			? ready
			: { ready: ready.ready, reason: ready.reason };
	res
		.writeHead(ready.ready ? 200 : 503, { "content-type": "application/json" })
		.end(`${JSON.stringify(shown)}\n`);
}

function notFound(_view: ListenerView, { res }: Exchange): void {
	res
		.writeHead(404, { "content-type": "text/plain" })
		.end("not found: try /, /status.json, /metrics, /healthz or /readyz\n");
}

/** A Map, not an object: a path such as /toString must not find a member of Object.prototype. */
const ROUTES = new Map<string, Route>([
	["/", servePage],
	["/index.html", servePage],
	["/favicon.ico", serveFavicon],
	["/status.json", serveStatus],
	["/metrics", serveMetrics],
	["/healthz", serveLiveness],
	["/readyz", serveReadiness],
]);

async function bind(server: Server, listen: string): Promise<void> {
	const { host, port } = parseHostPort(listen, "listen");
	await new Promise<void>((resolve, reject) => {
		server.once("error", (e: NodeJS.ErrnoException) =>
			reject(
				new CertificateeError("CONFIG_INVALID", `listen ${listen}: cannot bind (${e.code ?? e.message})`, {
					context: { field: "listen" },
					hint: "choose a free host:port for metrics and health, e.g. 127.0.0.1:9810",
				}),
			),
		);
		server.listen(port, host, () => resolve());
	});
}

/** A Bearer token, or the password of HTTP Basic, equal to `token` (compared in constant time). */
export function authorized(header: string | undefined, token: string): boolean {
	const m = /^(Bearer|Basic)\s+(\S+)\s*$/i.exec(header ?? "");
	if (!m) return false;
	let given = m[2] as string;
	if ((m[1] as string).toLowerCase() === "basic") {
		const decoded = Buffer.from(given, "base64").toString("utf8");
		const colon = decoded.indexOf(":");
		if (colon < 0) return false;
		given = decoded.slice(colon + 1);
	}
	const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();
	return timingSafeEqual(digest(given), digest(token));
}

/** The page checks for a new cycle as often as cycles run, between every 2 s and every 10 s. */
export function refreshSeconds(health: LoopHealth): number {
	return Math.min(10, Math.max(2, Math.round(health.intervalMs / 1000)));
}
