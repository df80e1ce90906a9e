/**
 * Scenario 3, ACME issuance throughput against a real Pebble, with validation skipped
 * (PEBBLE_VA_ALWAYS_VALID=1, PEBBLE_VA_NOSLEEP=1) and with real HTTP-01 (names resolve through
 * pebble-challtestsrv to 127.0.0.1): M single-name ECDSA P-256 certificates with certificatee's ACME issuer
 * (one process, concurrency 4 and 10) against Debian's lego and certbot, sequential and 10 parallel processes.
 * Wall time, and CPU time (user+sys) of the client side only (Pebble's CPU is not counted for anyone).
 */
import { execFileSync } from "node:child_process";
import { createReadStream, existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join, normalize } from "node:path";
import { acmeSourceSchema, createAcmeIssuer } from "../../src/sources/acme/index.js";
import { openFileStore } from "../../src/store/file-store.js";
import { type PebbleHandle, startPebble } from "../../test/harness/pebble.js";
import { seconds } from "../lib/proc.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";
import { timedBash } from "../lib/shell.js";

export interface AcmeOptions {
	certs: number;
	parallel: number;
	/** Which validation modes to run. */
	modes: Array<"always-valid" | "http-01">;
	/** Also time the peers one certificate after another (false in --full: at M = 50 they alone take ~8 minutes;
	 * the goals compare with the parallel peers). Default true. */
	sequentialPeers?: boolean;
}

interface Measured {
	tool: string;
	variant: string;
	wallS: number;
	cpuS: number;
	issued: number;
	error?: string;
}

type Peer = "lego" | "certbot";

function sh(cmd: string, args: string[]): string {
	try {
		return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
	} catch {
		return "";
	}
}

function installed(peer: Peer): string | undefined {
	// biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format syntax
	const v = sh("dpkg-query", ["-W", "-f=${Version}", peer]).trim();
	return v && sh("sh", ["-c", `command -v ${peer}`]).trim() ? v : undefined;
}

/** Installs lego and certbot from Debian when missing (as root); returns each peer's version or why not. */
export function ensurePeers(notes: string[]): Record<Peer, string | undefined> {
	const out: Record<Peer, string | undefined> = { lego: installed("lego"), certbot: installed("certbot") };
	const missing = (Object.keys(out) as Peer[]).filter((p) => out[p] === undefined);
	if (missing.length === 0) return out;
	const policy = sh("apt-cache", ["policy", ...missing]);
	const candidates = missing.filter((p) =>
		new RegExp(`^${p}:\\n(?:.*\\n)*?\\s+Candidate: (?!\\(none\\))`, "m").test(policy),
	);
	if (candidates.length > 0 && process.getuid?.() === 0) {
		console.log(`installing from Debian: ${candidates.join(" ")} (apt-get install -y)`);
		try {
			execFileSync("apt-get", ["install", "-y", ...candidates], {
				stdio: "inherit",
				env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
			});
		} catch (e) {
			notes.push(`apt-get install ${candidates.join(" ")} failed: ${String(e).slice(0, 200)}`);
		}
	}
	for (const p of missing) {
		out[p] = installed(p);
		if (out[p] === undefined) {
			const line = `SKIPPED ${p}: not installed and not installable here (apt-cache policy: ${candidates.includes(p) ? "candidate, install failed or not root" : "no candidate"})`;
			console.log(line);
			notes.push(line);
		}
	}
	return out;
}

/** Serves <root>/.well-known/acme-challenge/* on 127.0.0.1:port for the peers' webroot variants. */
function webroot(root: string, port: number): Promise<Server> {
	const server = createServer((req, res) => {
		const path = normalize(join(root, decodeURIComponent((req.url ?? "/").split("?")[0]!)));
		if (!path.startsWith(join(root, ".well-known/acme-challenge/")) || !existsSync(path)) {
			res.writeHead(404).end();
			return;
		}
		res.writeHead(200, { "content-type": "text/plain" });
		createReadStream(path).pipe(res);
	});
	return new Promise((resolve, reject) => {
		server.once("error", reject);
		server.listen(port, "127.0.0.1", () => resolve(server));
	});
}

function count(dir: string, match: (name: string) => boolean): number {
	if (!existsSync(dir)) return 0;
	let n = 0;
	for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true }))
		if (match(entry.name)) n += 1;
	return n;
}

export async function certificatee(
	pebble: PebbleHandle,
	names: string[],
	concurrency: number,
	dir: string,
): Promise<Measured> {
	const config = acmeSourceSchema.parse({
		name: `bench-c${concurrency}`,
		type: "acme",
		directory_url: pebble.directoryUrl,
		ca_file: pebble.caFile,
		http01: { listen: `127.0.0.1:${pebble.httpPort}` },
		concurrency,
	});
	const cpu0 = process.cpuUsage();
	const started = performance.now();
	const store = await openFileStore(dir);
	const issuer = createAcmeIssuer(config, { store });
	let issued = 0;
	let error: string | undefined;
	try {
		const results = await Promise.allSettled(
			names.map((n) =>
				issuer.issue({ certificate: n, domains: [n], keyType: "ecdsa-p256" }, AbortSignal.timeout(600_000)),
			),
		);
		issued = results.filter(
			(r) => r.status === "fulfilled" && r.value.certPem.includes("BEGIN CERTIFICATE"),
		).length;
		const failed = results.find((r) => r.status === "rejected");
		if (failed) error = String((failed as PromiseRejectedResult).reason).slice(0, 200);
	} finally {
		await issuer.close();
		store.close();
	}
	const wallS = seconds(started);
	const cpu = process.cpuUsage(cpu0);
	return {
		tool: "certificatee",
		variant: `1 process, concurrency ${concurrency}`,
		wallS,
		cpuS: (cpu.user + cpu.system) / 1e6,
		issued,
		...(error ? { error } : {}),
	};
}

async function peer(
	tool: Peer,
	parallel: number,
	pebble: PebbleHandle,
	names: string[],
	dir: string,
): Promise<Measured> {
	const env: NodeJS.ProcessEnv = {
		...process.env,
		LEGO_CA_CERTIFICATES: pebble.caFile,
		REQUESTS_CA_BUNDLE: pebble.caFile,
	};
	const port = pebble.httpPort;
	const web = join(dir, "webroot");
	await mkdir(join(web, ".well-known/acme-challenge"), { recursive: true });
	const list = names.join(" ");
	const server = `--server ${pebble.directoryUrl}`;
	let script: string;
	if (tool === "lego" && parallel <= 1) {
		script = `for n in ${list}; do lego ${server} --accept-tos --email bench@example.com --path ${dir}/lego --http --http.port 127.0.0.1:${port} -d $n run >>${dir}/out.log 2>&1 || exit 1; done`;
	} else if (tool === "lego") {
		script = `printf '%s\\n' ${list} | xargs -P ${parallel} -I{} sh -c 'lego ${server} --accept-tos --email bench@example.com --path ${dir}/lego/{} --http --http.webroot ${web} -d {} run >>${dir}/out-{}.log 2>&1'`;
	} else if (parallel <= 1) {
		script = `for n in ${list}; do certbot certonly --standalone --http-01-port ${port} --http-01-address 127.0.0.1 ${server} -d $n --non-interactive --agree-tos --register-unsafely-without-email --config-dir ${dir}/cb/config --work-dir ${dir}/cb/work --logs-dir ${dir}/cb/logs >>${dir}/out.log 2>&1 || exit 1; done`;
	} else {
		script = `printf '%s\\n' ${list} | xargs -P ${parallel} -I{} sh -c 'certbot certonly --webroot -w ${web} ${server} -d {} --non-interactive --agree-tos --register-unsafely-without-email --config-dir ${dir}/cb/{}/config --work-dir ${dir}/cb/{}/work --logs-dir ${dir}/cb/{}/logs >>${dir}/out-{}.log 2>&1'`;
	}
	const srv = parallel > 1 ? await webroot(web, port) : undefined;
	try {
		const r = await timedBash(script, env, 900_000);
		const issued =
			tool === "lego"
				? count(join(dir, "lego"), (n) => n.endsWith(".crt") && !n.endsWith(".issuer.crt"))
				: count(join(dir, "cb"), (n) => n === "fullchain.pem");
		return {
			tool,
			variant:
				parallel > 1 ? `${parallel} parallel processes (webroot)` : "sequential (standalone HTTP server)",
			wallS: r.wallS,
			cpuS: r.cpuS,
			issued,
			...(r.error ? { error: r.error } : {}),
		};
	} finally {
		await new Promise((r) => (srv ? srv.close(() => r(undefined)) : r(undefined)));
	}
}

export async function acme(o: AcmeOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	const notes: string[] = [];
	const versions = ensurePeers(notes);
	const rows: Row[] = [];
	const scratch = await mkdtemp(join(tmpdir(), "certificatee-bench-acme-"));
	let variantNo = 0;
	try {
		for (const mode of o.modes) {
			const run = async (
				label: string,
				fn: (p: PebbleHandle, names: string[], dir: string) => Promise<Measured>,
			) => {
				// A fresh Pebble per variant, unique names: no authorization reuse between variants.
				const pebble = await startPebble({ validation: mode === "always-valid" ? "always-valid" : "real" });
				const dir = join(scratch, `v${++variantNo}`);
				await mkdir(dir, { recursive: true });
				const names = Array.from({ length: o.certs }, (_, i) => `${label}${i}.test`);
				try {
					const m = await fn(pebble, names, dir);
					console.log(
						`  acme ${mode} ${m.tool} ${m.variant}: ${m.issued}/${o.certs} in ${m.wallS.toFixed(2)} s, CPU ${m.cpuS.toFixed(2)} s${m.error ? ` (${m.error})` : ""}`,
					);
					return m;
				} finally {
					await pebble.stop();
				}
			};
			const ours = [
				await run("cee4-", (p, n, d) => certificatee(p, n, 4, d)),
				await run("cee10-", (p, n, d) => certificatee(p, n, 10, d)),
			];
			const peers: Measured[] = [];
			for (const tool of ["lego", "certbot"] as const) {
				if (!versions[tool]) continue;
				if (o.sequentialPeers !== false)
					peers.push(await run(`${tool}s-`, (p, n, d) => peer(tool, 1, p, n, d)));
				peers.push(await run(`${tool}p-`, (p, n, d) => peer(tool, o.parallel, p, n, d)));
			}
			const best = ours.reduce((a, b) => (b.wallS < a.wallS ? b : a));
			const modeLabel = mode === "always-valid" ? "validation skipped" : "real HTTP-01";
			for (const c of ours) {
				for (const p of peers) {
					rows.push({
						metric: `${modeLabel}: ${o.certs} certs, wall (s)`,
						variant: c.variant,
						certificatee: c.wallS,
						baselineName: `${p.tool} ${versions[p.tool as Peer]}, ${p.variant}`,
						baseline: p.wallS,
						ratio: ratio(p.wallS, c.wallS),
					});
				}
			}
			for (const p of peers) {
				rows.push({
					metric: `${modeLabel}: ${o.certs} certs, CPU user+sys (s)`,
					variant: best.variant,
					certificatee: best.cpuS,
					baselineName: `${p.tool} ${versions[p.tool as Peer]}, ${p.variant}`,
					baseline: p.cpuS,
					ratio: ratio(p.cpuS, best.cpuS),
				});
			}
			for (const m of [...ours, ...peers]) {
				notes.push(
					`${modeLabel}, ${m.tool} ${m.variant}: issued ${m.issued}/${o.certs}${m.error ? `; ERROR ${m.error}` : ""}`,
				);
			}
		}
		notes.push(
			"certificatee: createAcmeIssuer with its defaults (poll_interval 1s) in the bench process, account registration included; CPU = process.cpuUsage() of that process.",
			"Peers: one bash script per variant, CPU from bash `times` (all child processes); parallel variants: xargs -P, one --path/--config-dir per certificate (a new account each), challenge files served from a shared webroot by a small HTTP server.",
			"A fresh Pebble (and challtestsrv for HTTP-01) per variant, started before the clock; names <variant><i>.test.",
		);
		return {
			scenario: "acme",
			title: "3. ACME issuance throughput",
			parameters: {
				M_certs: o.certs,
				parallel_processes: o.parallel,
				modes: o.modes.join("+"),
				key: "ECDSA P-256",
				lego: versions.lego ?? "skipped",
				certbot: versions.certbot ?? "skipped",
			},
			rows,
			notes,
			durationS: seconds(t0),
		};
	} finally {
		await rm(scratch, { recursive: true, force: true });
	}
}
