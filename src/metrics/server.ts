/**
 * The HTTP side of the daemon: /metrics, /healthz (the loop is alive), /readyz (configuration loaded and the
 * last cycle observed at least one endpoint of each target). The decisions are in health.ts.
 */
import { createServer, type Server } from "node:http";
import { parseHostPort } from "../base/address.js";
import { CertificateeError } from "../errors.js";
import { type LoopHealth, liveness, readiness } from "./health.js";
import type { Metrics } from "./index.js";

export interface HealthServer {
	/** The bound address, e.g. 127.0.0.1:9810 (useful with port 0). */
	address: string;
	close(): Promise<void>;
}

export async function startHealthServer(
	listen: string,
	metrics: Metrics,
	health: () => LoopHealth,
): Promise<HealthServer> {
	const server: Server = createServer((req, res) => {
		const path = (req.url ?? "/").split("?")[0];
		if (req.method !== "GET" && req.method !== "HEAD") {
			res.writeHead(405, { allow: "GET, HEAD" }).end();
			return;
		}
		if (path === "/metrics") {
			metrics.registry
				.metrics()
				.then((body) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(body))
				.catch((e: unknown) => res.writeHead(500).end(String(e)));
			return;
		}
		if (path === "/healthz") {
			const alive = liveness(health(), Date.now());
			res
				.writeHead(alive.ok ? 200 : 503, { "content-type": "text/plain" })
				.end(`${alive.ok ? "ok" : "not ok"}: ${alive.reason}\n`);
			return;
		}
		if (path === "/readyz") {
			const ready = readiness(health());
			res
				.writeHead(ready.ready ? 200 : 503, { "content-type": "application/json" })
				.end(`${JSON.stringify(ready)}\n`);
			return;
		}
		res
			.writeHead(404, { "content-type": "text/plain" })
			.end("not found: try /metrics, /healthz or /readyz\n");
	});
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
	const addr = server.address();
	const address = typeof addr === "object" && addr ? `${addr.address}:${addr.port}` : listen;
	return {
		address,
		close: () => new Promise<void>((resolve) => server.close(() => resolve())),
	};
}
