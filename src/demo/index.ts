/**
 * `certificatee demo`: certificatee on its embedded default. A local CA issues short-lived certificates for
 * a few demo names; certificatee syncs them into a directory target and, when haproxy is installed, into a
 * real HAProxy it starts on loopback, hot-swapping at each renewal (a lifetime of 90 s renews every minute).
 */
import { join, resolve } from "node:path";
import { stringify } from "yaml";
import { combinedPem, parseBundle } from "../certificates/index.js";
import type { LoadedConfig } from "../config/load.js";
import { parseConfig } from "../config/load.js";
import { buildEngine } from "../daemon/engine.js";
import { runDaemon } from "../daemon/loop.js";
import type { Logger } from "../log.js";
import { createMetrics } from "../metrics/index.js";
import { createLocalCaIssuer } from "../sources/local-ca/index.js";
import { localCaSourceSchema } from "../sources/local-ca/schema.js";
import { openFileStore } from "../store/file-store.js";
import { type DemoHaproxy, findHaproxy, freePort, startDemoHaproxy } from "./haproxy.js";

export interface DemoOptions {
	stateDir: string;
	log: Logger;
	out(line: string): void;
	/** Where SIGINT/SIGTERM come from (process); the demo runs until one arrives. */
	signals: NodeJS.EventEmitter;
	/** Certificate lifetime; renewal at 1/3 left. Default 90s. */
	lifetime?: string;
	/** How to run the CLI in the lines printed for the operator (default `certificatee`). */
	command?: string;
}

export const DEMO_CERTIFICATES = [
	{ name: "demo-a", domains: ["a.demo.test", "www.a.demo.test"] },
	{ name: "demo-b", domains: ["b.demo.test"] },
];

/** The demo's configuration as a config file would hold it (written to `<state-dir>/certificatee.yaml`). */
export function demoRawConfig(stateDir: string, listen: string, lifetime: string, haproxy?: DemoHaproxy) {
	return {
		state_dir: stateDir,
		interval: "30s",
		listen,
		sources: [{ name: "demo-ca", type: "local-ca", lifetime, ca_common_name: "certificatee demo CA" }],
		certificates: DEMO_CERTIFICATES.map((c) => ({ ...c, issuer: "demo-ca" })),
		targets: [
			{ name: "demo-files", type: "directory", path: join(stateDir, "out"), layout: "kubernetes-tls" },
			...(haproxy
				? [
						{
							name: "demo-haproxy",
							type: "haproxy-runtime",
							socket: haproxy.adminSocket,
							crt_dir: haproxy.crtDir,
							probe: `127.0.0.1:${haproxy.port}`,
						},
					]
				: []),
		],
	};
}

export function demoConfig(
	stateDir: string,
	listen: string,
	lifetime: string,
	haproxy?: DemoHaproxy,
): LoadedConfig {
	return parseConfig(demoRawConfig(stateDir, listen, lifetime, haproxy), "(embedded default)", { env: {} });
}

/**
 * The demo CA's root and, when HAProxy will run, a default certificate from it. The state store is closed
 * before the daemon opens it.
 */
async function prepareDemoCa(stateDir: string, withDefault: boolean) {
	const store = await openFileStore(stateDir);
	try {
		const ca = createLocalCaIssuer(
			localCaSourceSchema.parse({
				name: "demo-ca",
				type: "local-ca",
				ca_common_name: "certificatee demo CA",
			}),
			{ store },
		);
		const root = await ca.exportRoot();
		const request = {
			certificate: "demo-default",
			domains: ["default.demo.test"],
			keyType: "ecdsa-p256" as const,
			lifetimeMs: 86_400_000,
		};
		const fallback = withDefault ? await ca.issue(request, new AbortController().signal) : undefined;
		return { root, fallback };
	} finally {
		store.close();
	}
}

export async function runDemo(options: DemoOptions): Promise<void> {
	const stateDir = resolve(options.stateDir);
	const lifetime = options.lifetime ?? "90s";
	const { out, log } = options;
	const bin = findHaproxy();
	const { root, fallback } = await prepareDemoCa(stateDir, bin !== undefined);
	const rootFile = join(stateDir, "demo-ca.pem");
	const { writeFileSync, mkdirSync } = await import("node:fs");
	mkdirSync(join(stateDir, "out"), { recursive: true, mode: 0o700 });
	writeFileSync(rootFile, root);

	let haproxy: DemoHaproxy | undefined;
	if (bin && fallback) {
		const bundle = parseBundle(
			{ cert: fallback.certPem, chain: fallback.chainPem, key: fallback.keyPem },
			{ source: "demo default certificate" },
		);
		haproxy = await startDemoHaproxy(bin, join(stateDir, "haproxy"), combinedPem(bundle));
	} else {
		out(
			"haproxy is not installed: syncing into the directory target only (apt-get install haproxy to see hot swaps)",
		);
	}
	const listen = `127.0.0.1:${await freePort()}`;
	const loaded = demoConfig(stateDir, listen, lifetime, haproxy);
	// The same configuration as a file, so `certificatee status -c` can read the demo's live state.
	const configFile = join(stateDir, "certificatee.yaml");
	writeFileSync(configFile, stringify(demoRawConfig(stateDir, listen, lifetime, haproxy)), { mode: 0o644 });
	const metrics = createMetrics();
	try {
		await runDaemon({
			loadConfig: () => loaded,
			build: (config) => buildEngine(config, { log, readOnly: false, metrics, serveRequests: true }),
			metrics,
			log,
			signals: options.signals,
			onListening: (address) => {
				out("");
				out("certificatee demo is running (Ctrl-C stops it and everything it started)");
				out(
					`  certificates renew every ~${lifetime === "90s" ? "minute" : lifetime}; files in ${join(stateDir, "out")}`,
				);
				out(`  trust the demo CA: ${rootFile}`);
				if (haproxy) {
					const p = haproxy.port;
					out(`  HAProxy on 127.0.0.1:${p}, hot-swapped without reload:`);
					out(`    curl --cacert ${rootFile} --resolve a.demo.test:${p}:127.0.0.1 https://a.demo.test:${p}/`);
					out(
						`    openssl s_client -connect 127.0.0.1:${p} -servername b.demo.test </dev/null 2>/dev/null | openssl x509 -noout -serial -enddate`,
					);
				}
				out(`  metrics: curl http://${address}/metrics   health: http://${address}/readyz`);
				out(`  the whole story: ${options.command ?? "certificatee"} status -c ${configFile}`);
				out("");
			},
		});
	} finally {
		await haproxy?.stop();
	}
}
