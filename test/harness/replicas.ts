/**
 * Several `certificatee run` replicas sharing one etcd (docs/cluster.md), each with its own state_dir and
 * listen port but one configuration file (the differences come from the environment, as in a deployment):
 * a local-ca issuer, the certificates asked for, and one haproxy-runtime target per HAProxy node.
 *
 *   const r = await startReplicas({ etcd, nodes: [h1, h2], members: 3, certificates: [{ name: "web", domains: ["web.test"] }] });
 *   await r.waitServed("web.test");           // every node serves a certificate for it
 *   const i = await r.leader();                // index of the replica that leads
 *   r.replica(i).daemon.signal("SIGKILL");
 *   await r.stop();
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { stringify } from "yaml";
import { probeServed } from "../../src/probe/index.js";
import { type Daemon, spawnCertificatee } from "./cli.js";
import { scaled } from "./deadline.js";
import { type Haproxy, socketCommand } from "./haproxy.js";
import { freePorts } from "./ports.js";
import { parseScrape } from "./scrape.js";

export interface ReplicaCertificate {
	name: string;
	domains: string[];
}

export interface ReplicasOptions {
	etcdEndpoints: string[];
	nodes: Haproxy[];
	members: number;
	certificates: ReplicaCertificate[];
	/** Default "3s". */
	leaseTtl?: string;
	shard?: boolean;
	/** A directory source every member reads (one path: the members run on this machine). */
	directorySource?: string;
}

export interface Replica {
	member: string;
	daemon: Daemon;
	listen: string;
	stateDir: string;
}

export interface Replicas {
	configFile: string;
	/** The environment a CLI command needs to read the same configuration (member name aside). */
	env: Record<string, string>;
	prefix: string;
	encryptionKeyFile: string;
	replica(i: number): Replica;
	readonly count: number;
	/** Starts replica i again (after a kill), same member name and state_dir. */
	restart(i: number): void;
	/** The parsed /metrics samples of replica i (name{labels} -> value); undefined when it does not answer. */
	metrics(i: number): Promise<Map<string, number> | undefined>;
	/** GET path of replica i's server, parsed JSON, or undefined. */
	json(i: number, path: string): Promise<unknown>;
	/** Indexes of the live replicas that say they lead (by their certificatee_cluster_leader gauge). */
	leaders(): Promise<number[]>;
	/** Waits for exactly one leader among the live replicas; returns its index. */
	leader(timeoutMs?: number): Promise<number>;
	/** Serial (normalised) each node serves for `sni`, in node order. */
	served(sni: string): Promise<Array<string | undefined>>;
	/** Waits until every node serves a certificate whose serial passes `accept` (default: any). */
	waitServed(sni: string, accept?: (serial: string) => boolean, timeoutMs?: number): Promise<string[]>;
	/** Rewrites the configuration with these certificates and sends SIGHUP to every live replica. */
	setCertificates(certificates: ReplicaCertificate[]): void;
	alive(i: number): boolean;
	stop(): Promise<void>;
}

/** `${NAME}` as certificatee's configuration interpolates it. */
const placeholder = (name: string) => `\${${name}}`;

export async function startReplicas(options: ReplicasOptions): Promise<Replicas> {
	const dir = mkdtempSync(join(tmpdir(), "certificatee-replicas-"));
	const prefix = `t-${randomBytes(4).toString("hex")}/`;
	const encryptionKeyFile = join(dir, "cluster.key");
	writeFileSync(encryptionKeyFile, randomBytes(32).toString("base64"), { mode: 0o600 });
	const configFile = join(dir, "certificatee.yaml");
	const writeConfig = (certificates: ReplicaCertificate[]) =>
		writeFileSync(
			configFile,
			stringify({
				// Per replica, from its environment (certificatee's ${VAR} interpolation): hosts differ in these only.
				state_dir: placeholder("CT_STATE_DIR"),
				listen: `127.0.0.1:${placeholder("CT_PORT")}`,
				interval: "1h",
				log_level: "info",
				cluster: {
					etcd: { endpoints: options.etcdEndpoints, prefix },
					lease_ttl: options.leaseTtl ?? "3s",
					member: placeholder("CT_MEMBER"),
					shard_endpoints: options.shard ?? false,
					encryption_key_file: encryptionKeyFile,
				},
				sources: [
					{ name: "local", type: "local-ca" },
					...(options.directorySource
						? [{ name: "files", type: "directory", path: options.directorySource, debounce: "100ms" }]
						: []),
				],
				certificates: certificates.map((c) => ({ ...c, issuer: "local", lifetime: "1d" })),
				targets: options.nodes.map((h, i) => ({
					name: `node-${i}`,
					type: "haproxy-runtime",
					socket: h.adminSocket,
					crt_dir: h.crtDir,
					probe: h.address,
				})),
			}),
		);
	writeConfig(options.certificates);
	const ports = await freePorts(options.members);
	const replicas: Replica[] = [];
	const envOf = (i: number) => ({
		CT_STATE_DIR: join(dir, `state-${i}`),
		CT_PORT: String(ports[i]),
		CT_MEMBER: `member-${i}`,
	});
	const spawnReplica = (i: number): Replica => {
		const env = envOf(i);
		return {
			member: env.CT_MEMBER,
			listen: `127.0.0.1:${env.CT_PORT}`,
			stateDir: env.CT_STATE_DIR,
			daemon: spawnCertificatee(["run", "--config", configFile], { env }),
		};
	};
	for (let i = 0; i < options.members; i++) replicas.push(spawnReplica(i));
	const alive = (i: number) => {
		const child = replicas[i]!.daemon.child;
		return child.exitCode === null && child.signalCode === null;
	};
	const get = async (i: number, path: string) => {
		if (!alive(i)) return undefined;
		try {
			const response = await fetch(`http://${replicas[i]!.listen}${path}`, {
				signal: AbortSignal.timeout(2000),
			});
			return response.ok || path === "/readyz" ? await response.text() : undefined;
		} catch {
			return undefined;
		}
	};
	const metrics = async (i: number) => {
		const text = await get(i, "/metrics");
		return text === undefined ? undefined : parseScrape(text);
	};
	const leaders = async () => {
		const out: number[] = [];
		for (let i = 0; i < replicas.length; i++)
			if ((await metrics(i))?.get("certificatee_cluster_leader") === 1) out.push(i);
		return out;
	};
	const served = (sni: string) =>
		Promise.all(
			options.nodes.map((h) =>
				probeServed({ address: h.address, sni, timeoutMs: 2000 }).then(
					(r) => (r.names.includes(sni) ? r.serial : undefined),
					() => undefined,
				),
			),
		);
	/**
	 * For a failure's text: for each node that does not serve, what its worker's CLI sessions are doing (a
	 * command holding the certificate lock shows there) and the replicas' last warnings about that node.
	 */
	const whyNot = async (serials: Array<string | undefined>): Promise<string> => {
		const parts: string[] = [];
		for (const [i, serial] of serials.entries()) {
			if (serial !== undefined) continue;
			const node = `node-${i}`;
			const sessions = await socketCommand(options.nodes[i]!.adminSocket, "show sess all").catch(
				(e: unknown) => `(show sess all failed: ${String(e)})`,
			);
			const said = replicas.flatMap((r) =>
				r.daemon.logs
					.filter((l) => (l.level ?? 0) >= 40 && JSON.stringify(l).includes(node))
					.slice(-5)
					.map((l) => `  ${r.member}: ${JSON.stringify(l).slice(0, 600)}`),
			);
			parts.push(`\n${node}: the replicas' last warnings:\n${said.join("\n") || "  none"}`);
			parts.push(`${node}: show sess all:\n${sessions.slice(0, 4000)}`);
		}
		return parts.join("\n");
	};
	return {
		configFile,
		env: envOf(0),
		prefix,
		encryptionKeyFile,
		replica: (i) => replicas[i]!,
		count: replicas.length,
		restart(i) {
			replicas[i] = spawnReplica(i);
		},
		metrics,
		async json(i, path) {
			const text = await get(i, path);
			return text === undefined ? undefined : JSON.parse(text);
		},
		leaders,
		async leader(timeoutMs = scaled(20_000)) {
			const end = Date.now() + timeoutMs;
			for (;;) {
				const now = await leaders();
				if (now.length === 1) return now[0]!;
				if (Date.now() > end) throw new Error(`expected one leader, found ${JSON.stringify(now)}`);
				await sleep(100);
			}
		},
		served,
		async waitServed(sni, accept = () => true, timeoutMs = scaled(30_000)) {
			const end = Date.now() + timeoutMs;
			for (;;) {
				const serials = await served(sni);
				if (serials.every((s) => s !== undefined && accept(s))) return serials as string[];
				if (Date.now() > end)
					throw new Error(`${sni} not served everywhere: ${JSON.stringify(serials)}${await whyNot(serials)}`);
				await sleep(50);
			}
		},
		setCertificates(certificates) {
			writeConfig(certificates);
			for (let i = 0; i < replicas.length; i++) if (alive(i)) replicas[i]!.daemon.signal("SIGHUP");
		},
		alive,
		async stop() {
			await Promise.all(
				replicas.map(async (r) => {
					// A frozen replica (SIGSTOP; signalCode is set only at exit, so not seen there) takes SIGTERM once resumed.
					r.daemon.signal("SIGCONT");
					r.daemon.signal("SIGTERM");
					await Promise.race([r.daemon.exited, sleep(5000)]);
					await r.daemon.stop();
				}),
			);
			rmSync(dir, { recursive: true, force: true });
		},
	};
}
