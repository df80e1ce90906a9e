/**
 * A real Pebble ACME CA (Debian's pebble 2.4) for tests and benches, on free loopback ports, with its own
 * HTTPS CA made by the openssl CLI in a temp dir. With `validation: "http-01"` it also starts
 * pebble-challtestsrv as Pebble's DNS server (every name resolves to 127.0.0.1 unless told otherwise), so
 * Pebble really fetches http://<name>:<httpPort>/.well-known/acme-challenge/<token> and really looks up
 * _acme-challenge TXT records set through the challtestsrv management API. With `dnsServer`, Pebble resolves
 * through that server instead (a real BIND for RFC 2136 tests).
 *
 *   const pebble = await startPebble({ validation: "http-01" });
 *   // ... issue against pebble.directoryUrl, trusting pebble.caFile; answer HTTP-01 on pebble.httpPort
 *   await pebble.stop();
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Agent, request } from "undici";
import { makeHttpsCertificate } from "./https-cert.js";
import { freePorts } from "./ports.js";
import { type Proc, startProcess, stopProcess, waitUntil } from "./process.js";

export interface PebbleOptions {
	/** "always-valid": PEBBLE_VA_ALWAYS_VALID=1, no challenge is checked. "real" (default): Pebble validates
	 * HTTP-01 and DNS-01 against pebble-challtestsrv's DNS. */
	validation?: "always-valid" | "real";
	/** Seconds an issued certificate is valid (Pebble's default is 5 years). */
	certificateValidityPeriod?: number;
	/** Port Pebble's VA connects to for HTTP-01 (default: a free port; serve the responder there). */
	httpPort?: number;
	/** Names Pebble refuses to issue for (newOrder fails with rejectedIdentifier). */
	domainBlocklist?: string[];
	/** EAB key ids → base64url HMAC keys; when given, EAB is required. */
	externalAccountMACKeys?: Record<string, string>;
	/** Percentage of good nonces rejected as badNonce (default 0: deterministic runs). */
	nonceReject?: number;
	/** With validation "real": Pebble resolves through this DNS server ("host:port", e.g. a BIND from
	 * test/harness/bind.ts) instead of pebble-challtestsrv, which is then not started. */
	dnsServer?: string;
	/** Extra environment for Pebble (e.g. PEBBLE_AUTHZREUSE). */
	env?: Record<string, string>;
}

export interface ChallTestSrv {
	managementUrl: string;
	dnsAddress: string;
	/** Make `host` resolve to these IPv4 addresses instead of 127.0.0.1. */
	addA(host: string, addresses: string[]): Promise<void>;
	setTxt(host: string, value: string): Promise<void>;
	clearTxt(host: string): Promise<void>;
}

export interface PebbleHandle {
	directoryUrl: string;
	managementUrl: string;
	/** PEM of the CA that signed Pebble's own HTTPS certificate (trust it to talk to Pebble). */
	caPem: string;
	/** The same CA as a file, for `ca_file`. */
	caFile: string;
	/** Where Pebble's VA connects for HTTP-01 (on 127.0.0.1). */
	httpPort: number;
	/** Present with validation "real" and no `dnsServer`. */
	challtestsrv: ChallTestSrv | undefined;
	/** Pebble's root (changes on every start): the trust anchor for issued chains. */
	root(): Promise<string>;
	intermediate(): Promise<string>;
	/** Pebble's combined stdout/stderr so far. */
	log(): Promise<string>;
	/** Stops Pebble and challtestsrv (idempotent) and removes the temp dir. */
	stop(): Promise<void>;
	/** Stops only Pebble (the temp dir stays until stop()): for "CA is down" tests. */
	kill(): Promise<void>;
}

/**
 * Starts Pebble (and challtestsrv). Ports come from the OS but are released before Pebble binds them, so
 * another test may take one in between: a start that fails on a taken port is retried with new ports.
 */
export async function startPebble(options: PebbleOptions = {}): Promise<PebbleHandle> {
	for (let attempt = 1; ; attempt++) {
		try {
			return await startPebbleOnce(options);
		} catch (e) {
			if (attempt >= 3 || !/address already in use/.test(String(e))) throw e;
		}
	}
}

async function startPebbleOnce(options: PebbleOptions): Promise<PebbleHandle> {
	const dir = await mkdtemp(path.join(tmpdir(), "certificatee-pebble-"));
	let pebble: Proc | undefined;
	let chall: Proc | undefined;
	let agent: Agent | undefined;
	let stopped = false;
	const stopAll = async () => {
		if (stopped) return;
		stopped = true;
		await Promise.all([stopProcess(pebble), stopProcess(chall)]);
		await agent?.close();
		await rm(dir, { recursive: true, force: true });
	};
	try {
		await makeHttpsCertificate(dir);
		const caPem = await readFile(path.join(dir, "ca.pem"), "utf8");
		agent = new Agent({ connect: { ca: caPem } });
		const real = (options.validation ?? "real") === "real";
		const [acmePort, mgmtPort, defaultHttpPort, tlsPort, dnsPort, challMgmtPort] = (await freePorts(6, {
			udp: true,
		})) as [number, number, number, number, number, number];
		const httpPort = options.httpPort ?? defaultHttpPort;
		const config = {
			pebble: {
				listenAddress: `127.0.0.1:${acmePort}`,
				managementListenAddress: `127.0.0.1:${mgmtPort}`,
				certificate: "cert.pem",
				privateKey: "key.pem",
				httpPort,
				tlsPort,
				ocspResponderURL: "",
				externalAccountBindingRequired: options.externalAccountMACKeys !== undefined,
				...(options.externalAccountMACKeys ? { externalAccountMACKeys: options.externalAccountMACKeys } : {}),
				...(options.domainBlocklist ? { domainBlocklist: options.domainBlocklist } : {}),
				...(options.certificateValidityPeriod
					? { certificateValidityPeriod: options.certificateValidityPeriod }
					: {}),
			},
		};
		await writeFile(path.join(dir, "pebble-config.json"), JSON.stringify(config, null, 2));

		let challtestsrv: ChallTestSrv | undefined;
		if (real && !options.dnsServer) {
			const managementUrl = `http://127.0.0.1:${challMgmtPort}`;
			// biome-ignore format: flag/value pairs
			chall = startProcess("pebble-challtestsrv", [
				"-dns01", `127.0.0.1:${dnsPort}`, "-http01", "", "-https01", "", "-tlsalpn01", "",
				"-management", `127.0.0.1:${challMgmtPort}`, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
			], { cwd: dir, env: process.env });
			const post = async (endpoint: string, body: unknown) => {
				const res = await request(`${managementUrl}${endpoint}`, {
					method: "POST",
					body: JSON.stringify(body),
				});
				await res.body.text();
				if (res.statusCode !== 200) throw new Error(`challtestsrv ${endpoint}: HTTP ${res.statusCode}`);
			};
			await waitUntil("pebble-challtestsrv", chall, async () => {
				// An unknown host lookup is harmless and proves the management API answers.
				await post("/clear-txt", { host: "_ready.test." });
				return true;
			});
			const fqdn = (h: string) => (h.endsWith(".") ? h : `${h}.`);
			challtestsrv = {
				managementUrl,
				dnsAddress: `127.0.0.1:${dnsPort}`,
				addA: (host, addresses) => post("/add-a", { host: fqdn(host), addresses }),
				setTxt: (host, value) => post("/set-txt", { host: fqdn(host), value }),
				clearTxt: (host) => post("/clear-txt", { host: fqdn(host) }),
			};
		}

		const env: NodeJS.ProcessEnv = {
			...process.env,
			PEBBLE_VA_NOSLEEP: "1",
			PEBBLE_WFE_NONCEREJECT: String(options.nonceReject ?? 0),
			...(real ? {} : { PEBBLE_VA_ALWAYS_VALID: "1" }),
			...options.env,
		};
		const args = ["-config", "pebble-config.json", "-strict=false"];
		if (real) args.push("-dnsserver", options.dnsServer ?? `127.0.0.1:${dnsPort}`);
		pebble = startProcess("pebble", args, { cwd: dir, env });

		const directoryUrl = `https://localhost:${acmePort}/dir`;
		const managementUrl = `https://localhost:${mgmtPort}`;
		const get = async (url: string): Promise<string> => {
			const res = await request(url, { dispatcher: agent });
			const text = await res.body.text();
			if (res.statusCode !== 200) throw new Error(`GET ${url}: HTTP ${res.statusCode}`);
			return text;
		};
		await waitUntil("pebble", pebble, async () => (await get(directoryUrl)).includes("newOrder"));
		await waitUntil(
			"pebble management",
			pebble,
			async () => (await get(`${managementUrl}/roots/0`)).length > 0,
		);

		const pebbleProc = pebble;
		return {
			directoryUrl,
			managementUrl,
			caPem,
			caFile: path.join(dir, "ca.pem"),
			httpPort,
			challtestsrv,
			root: () => get(`${managementUrl}/roots/0`),
			intermediate: () => get(`${managementUrl}/intermediates/0`),
			log: async () => pebbleProc.output(),
			stop: stopAll,
			kill: () => stopProcess(pebbleProc),
		};
	} catch (e) {
		await stopAll();
		throw e;
	}
}
