/**
 * Scenario 1, hot swap versus reload. A real HAProxy holds N certificates (one crt directory, one TLS bind);
 * K of them are rolled to new certificates (a) by certificatee: one sync cycle of the haproxy-runtime target,
 * and separately of the haproxy-dataplane target through the Data Plane API stand-in (bench/lib/dpapi-standin.ts); (b) the deploy-hook way:
 * write the K files (temp + rename each), then a master-worker reload (SIGUSR2), done when the new worker
 * answers. A separate process handshakes continuously over rotating SNI names during each rollout.
 */
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeServed } from "../../src/probe/index.js";
import { dataplaneTargetSchema } from "../../src/targets/haproxy-dataplane/schema.js";
import { runtimeTargetSchema } from "../../src/targets/haproxy-runtime/schema.js";
import { type BuiltTarget, buildTarget } from "../../src/targets/registry.js";
import { type Haproxy, startHaproxy } from "../../test/harness/haproxy.js";
import { type Standins, spawnStandins } from "../lib/dpapi-standin.js";
import { type HandshakeStats, startHandshakes } from "../lib/handshakes.js";
import { crtDirFiles, desiredOf, makeCerts, type PoolCert } from "../lib/pool.js";
import { sampleRss, seconds } from "../lib/proc.js";
import { reloadUntil } from "../lib/reload.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";

export interface HotswapOptions {
	certs: number;
	roll: number;
}

interface Rollout {
	variant: string;
	wallS: number;
	writes: number;
	rssPeakMiB: number;
	handshakes: HandshakeStats;
	servedNew: boolean;
	reloaded: boolean;
	/** Reload only: seconds until a new worker answered on the admin socket. */
	newWorkerS?: number;
}

async function servesNew(h: Haproxy, c: PoolCert): Promise<boolean> {
	const served = await probeServed({ address: h.address, sni: c.sni, timeoutMs: 1000 });
	return served.serial.replace(/^0+(?=.)/, "") === c.leaf.serial.toUpperCase().replace(/^0+(?=.)/, "");
}

const WRITE_OPS = /^(create|replace|delete|add)/;

async function rollout(
	variant: "runtime" | "dataplane" | "reload",
	base: PoolCert[],
	renewed: PoolCert[],
	scratch: string,
): Promise<Rollout> {
	const h: Haproxy = await startHaproxy({ crtDir: crtDirFiles(base) });
	let standin: Standins | undefined;
	let target: BuiltTarget | undefined;
	try {
		const pidBefore = await h.workerPid();
		if (variant === "runtime") {
			const config = runtimeTargetSchema.parse({
				name: "lb",
				type: "haproxy-runtime",
				socket: h.adminSocket,
				crt_dir: h.crtDir,
			});
			target = buildTarget(config, { now: () => new Date() });
		} else if (variant === "dataplane") {
			// The Data Plane API stand-in (the double's handlers, reads from memory): the figure is certificatee's own.
			standin = await spawnStandins(
				[{ adminSocket: h.adminSocket, haproxyDir: h.dir, storageDir: h.crtDir }],
				{
					processes: 1,
					username: "admin",
					password: "standin-password",
					scratch,
				},
			);
			const config = dataplaneTargetSchema.parse({
				name: "fleet",
				type: "haproxy-dataplane",
				storage_dir: h.crtDir,
				endpoints: [{ name: "lb", url: standin.urls[0], username: "admin", password: "standin-password" }],
			});
			target = buildTarget(config, { now: () => new Date() });
		}
		// A running daemon has observed the endpoint before (its file cache is warm): one plan cycle, no writes.
		if (target) await target.run(desiredOf(renewed), "plan", new AbortController().signal);
		// Rotating SNI: the rolled names interleaved with names that stay.
		const names: string[] = [];
		for (let i = 0; i < base.length; i++) names.push(base[i]!.sni);
		const rotating = names.slice(0, renewed.length * 2).sort((a, b) => (a > b ? 1 : -1));
		const load = await startHandshakes(h.port, rotating.length > 0 ? rotating : names, scratch);
		const rss = sampleRss(h.masterPid);
		await new Promise((r) => setTimeout(r, 200));
		const started = performance.now();
		let writes = 0;
		let newWorkerS: number | undefined;
		if (target) {
			const report = await target.run(desiredOf(renewed), "sync", new AbortController().signal);
			const endpoint = report.endpoints[0]!;
			if (!endpoint.ok) throw new Error(`${variant}: ${endpoint.error?.message}`);
			const failed = endpoint.steps.filter((s) => s.result !== "ok");
			if (failed.length > 0) throw new Error(`${variant}: ${failed.length} steps failed`);
			writes = standin
				? Object.entries(await standin.counts())
						.filter(([op]) => WRITE_OPS.test(op))
						.reduce((n, [, c]) => n + c, 0)
				: endpoint.steps.length;
		} else {
			for (const c of renewed) {
				const path = join(h.crtDir, `${c.name}.pem`);
				await writeFile(`${path}.tmp`, c.leaf.combinedPem, { mode: 0o600 });
				await rename(`${path}.tmp`, path);
			}
			const last = renewed[renewed.length - 1]!;
			await reloadUntil(h, async () => {
				if (newWorkerS === undefined && (await h.workerPid()) !== pidBefore) newWorkerS = seconds(started);
				return servesNew(h, last);
			});
			writes = renewed.length;
		}
		const wallS = seconds(started);
		await new Promise((r) => setTimeout(r, 200));
		const handshakes = await load.stop();
		const rssPeakMiB = rss.stop();
		let servedNew = true;
		for (const c of renewed) if (!(await servesNew(h, c))) servedNew = false;
		const reloaded = (await h.workerPid()) !== pidBefore;
		return {
			variant,
			wallS,
			writes,
			rssPeakMiB,
			handshakes,
			servedNew,
			reloaded,
			...(newWorkerS !== undefined ? { newWorkerS } : {}),
		};
	} finally {
		await target?.close();
		await standin?.close();
		await h.stop();
	}
}

export async function hotswap(o: HotswapOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	const scratch = await mkdtemp(join(tmpdir(), "certificatee-bench-hot-"));
	try {
		const base = await makeCerts(o.certs);
		const renewed = await makeCerts(o.roll);
		const runs: Rollout[] = [];
		for (const v of ["runtime", "dataplane", "reload"] as const) {
			runs.push(await rollout(v, base, renewed, scratch));
		}
		const [rt, dp, rl] = runs as [Rollout, Rollout, Rollout];
		const rows: Row[] = [];
		for (const a of [rt, dp]) {
			const variant = a === rt ? "haproxy-runtime target" : "dataplane target (API stand-in)";
			const base = { baselineName: "write files + reload (SIGUSR2)", variant };
			rows.push(
				{ ...base, metric: "rollout wall (s)", certificatee: a.wallS, baseline: rl.wallS },
				{
					...base,
					metric: "failed handshakes",
					certificatee: a.handshakes.failures,
					baseline: rl.handshakes.failures,
				},
				{
					...base,
					metric: "handshakes during rollout",
					certificatee: a.handshakes.handshakes,
					baseline: rl.handshakes.handshakes,
					note: "count, not a cost",
				},
				{
					...base,
					metric: "handshake p50 (ms)",
					certificatee: a.handshakes.p50Ms,
					baseline: rl.handshakes.p50Ms,
				},
				{
					...base,
					metric: "handshake p99 (ms)",
					certificatee: a.handshakes.p99Ms,
					baseline: rl.handshakes.p99Ms,
				},
				{
					...base,
					metric: "handshake max (ms)",
					certificatee: a.handshakes.maxMs,
					baseline: rl.handshakes.maxMs,
				},
				{
					...base,
					metric: "HAProxy RSS peak, master+workers (MiB)",
					certificatee: a.rssPeakMiB,
					baseline: rl.rssPeakMiB,
				},
			);
		}
		for (const r of rows) if (r.note === undefined) r.ratio = ratio(r.baseline, r.certificatee);
		const notes = runs.map(
			(r) =>
				`${r.variant}: ${r.writes} writes, all K rolled names serve the new certificate: ${r.servedNew ? "yes" : "NO"}, ` +
				`worker reloaded: ${r.reloaded ? "yes" : "no"}${r.newWorkerS !== undefined ? ` (new worker answering after ${r.newWorkerS.toFixed(2)} s)` : ""}, handshake errors: ${JSON.stringify(r.handshakes.errors)}`,
		);
		notes.push(
			"Each variant on a fresh HAProxy (Debian 2.6.12, master-worker) started with the same N certificates; " +
				"certificatee's time is one full sync cycle (observe all N refs, classify, plan, write K; after one earlier plan cycle, as in a running daemon), without served-certificate probes; " +
				"certificatee's storage writes are durable (fsync of the file and of the directory per certificate), the baseline's file writes are not fsynced (as cp in a deploy hook); " +
				"the reload's time runs from the first file write until the last rolled name serves its new certificate (TLS probe every 10 ms).",
			`Handshakes: one client process, back to back, no session resumption, SNI rotating over ${Math.min(o.certs, o.roll * 2)} names (the K rolled and as many unchanged), from 200 ms before to 200 ms after the rollout.`,
		);
		return {
			scenario: "hotswap",
			title: "1. Hot swap vs reload",
			parameters: { N_certs_loaded: o.certs, K_rolled: o.roll, key: "ECDSA P-256" },
			rows,
			notes,
			durationS: seconds(t0),
		};
	} finally {
		await rm(scratch, { recursive: true, force: true });
	}
}
