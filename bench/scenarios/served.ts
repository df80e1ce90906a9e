/**
 * Scenario "served": time to served, the way a user waits for it. A real HAProxy holds N certificates; K renewed
 * certificates arrive, and the clock runs until the last of the K names serves its new serial (TLS probes by
 * SNI from 4 concurrent pollers started with the work). Three variants, each on a fresh HAProxy in one run:
 *
 *   floor     the physical limit: durable writes (file fsync, one directory fsync) then `set ssl cert` +
 *             `commit ssl cert` for each over one admin-socket connection, no observation;
 *   daemon    a running `certificatee run` (directory source of the N files, one haproxy-runtime target) that
 *             has converged; the K files are renamed into its source directory (how a renewal tool drops them);
 *   reload    the deploy-hook way: the K files written into HAProxy's crt directory, then a reload (SIGUSR2).
 */
import { mkdir, mkdtemp, open, rename, rm, writeFile } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { probeServed } from "../../src/probe/index.js";
import { ensureBuilt, spawnCertificatee } from "../../test/harness/cli.js";
import { type Haproxy, startHaproxy } from "../../test/harness/haproxy.js";
import { busiestProfile, selfTimeMarkdown } from "../lib/cpuprofile.js";
import { writeDaemonConfig } from "../lib/daemon.js";
import { crtDirFiles, makeCerts, type PoolCert } from "../lib/pool.js";
import { cpuSeconds, seconds } from "../lib/proc.js";
import { masterReady } from "../lib/reload.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";

export interface ServedOptions {
	certs: number;
	roll: number;
	/** Profile the daemon (node --cpu-prof) into this directory and summarise the wait's self times there. */
	cpuProfDir?: string;
}

interface Run {
	variant: "floor" | "daemon" | "reload";
	wallS: number;
	/** certificatee's own CPU seconds during the wait (daemon only). */
	cpuS?: number;
	/** The daemon's cycles that finished during the wait: writes and duration of each (daemon only). */
	cycles?: Array<{ writes: number; durationMs: number }>;
	/** With cpuProfDir: the summary file of the daemon's profile. */
	profile?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const serialOf = (s: string) => s.toUpperCase().replace(/^0+(?=.)/, "");

/** Resolves when every one of `renewed` serves its new serial; 4 pollers share the names. */
async function allServed(h: Haproxy, renewed: readonly PoolCert[], timeoutMs = 120_000): Promise<void> {
	const pending = [...renewed];
	const deadline = performance.now() + timeoutMs;
	const poller = async () => {
		for (;;) {
			const c = pending.shift();
			if (!c) return;
			const served = await probeServed({ address: h.address, sni: c.sni, timeoutMs: 1000 }).catch(
				() => undefined,
			);
			if (served && serialOf(served.serial) === serialOf(c.leaf.serial)) continue;
			if (performance.now() > deadline) throw new Error(`${c.sni} does not serve its new certificate`);
			pending.push(c);
			await sleep(5);
		}
	};
	await Promise.all([poller(), poller(), poller(), poller()]);
}

async function durableWrite(path: string, text: string): Promise<void> {
	const temp = join(dirname(path), `.${basename(path)}.tmp`);
	const f = await open(temp, "w", 0o600);
	try {
		await f.writeFile(text);
		await f.sync();
	} finally {
		await f.close();
	}
	await rename(temp, path);
}

async function fsyncDir(dir: string): Promise<void> {
	const d = await open(dir, "r");
	await d.sync();
	await d.close();
}

/** One connection in HAProxy's interactive mode: a command per line, answers end with an empty line. */
async function socketSession(path: string) {
	const socket = createConnection(path);
	await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
	let buffer = "";
	let waiter: (() => void) | undefined;
	socket.on("data", (d) => {
		buffer += d.toString("utf8");
		waiter?.();
	});
	socket.write("prompt\n");
	const answer = async (): Promise<string> => {
		for (;;) {
			const end = buffer.indexOf("\n> ");
			if (end >= 0) {
				const out = buffer.slice(0, end);
				buffer = buffer.slice(end + 3);
				return out;
			}
			await new Promise<void>((r) => {
				waiter = r;
			});
		}
	};
	await answer().catch(() => "");
	return {
		async command(line: string): Promise<string> {
			socket.write(`${line}\n`);
			return answer();
		},
		close: () => socket.end(),
	};
}

async function floor(base: PoolCert[], renewed: PoolCert[]): Promise<Run> {
	const h = await startHaproxy({ crtDir: crtDirFiles(base) });
	try {
		const session = await socketSession(h.adminSocket);
		const started = performance.now();
		const served = allServed(h, renewed);
		await Promise.all(renewed.map((c) => durableWrite(join(h.crtDir, `${c.name}.pem`), c.leaf.combinedPem)));
		await fsyncDir(h.crtDir);
		for (const c of renewed) {
			const path = join(h.crtDir, `${c.name}.pem`);
			const set = await session.command(`set ssl cert ${path} <<\n${c.leaf.combinedPem.trimEnd()}\n`);
			if (!/Transaction (created|updated)/.test(set)) throw new Error(`set ssl cert ${path}: ${set}`);
			const commit = await session.command(`commit ssl cert ${path}`);
			if (!/Success!/.test(commit)) throw new Error(`commit ssl cert ${path}: ${commit}`);
		}
		await served;
		session.close();
		return { variant: "floor", wallS: seconds(started) };
	} finally {
		await h.stop();
	}
}

async function daemon(
	base: PoolCert[],
	renewed: PoolCert[],
	scratch: string,
	cpuProfDir: string | undefined,
): Promise<Run> {
	const h = await startHaproxy({ crtDir: crtDirFiles(base) });
	const work = await mkdtemp(join(scratch, "daemon-"));
	const source = join(work, "source");
	await mkdir(source);
	for (const c of base) await writeFile(join(source, `${c.name}.pem`), c.leaf.combinedPem, { mode: 0o600 });
	const config = await writeDaemonConfig(work, source, h);
	if (cpuProfDir) await mkdir(cpuProfDir, { recursive: true });
	const d = spawnCertificatee(
		["run", "--config", config],
		cpuProfDir ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`] } : {},
	);
	try {
		await d.waitForLog(/cycle finished/, { timeoutMs: 300_000 });
		// A long-running daemon is past its source's racy window (2 s) and the background re-read of the files it
		// first loaded within it (about a second at N = 5,000).
		await sleep(5000);
		const from = d.logs.length;
		const cpu0 = cpuSeconds(d.child.pid!);
		const started = performance.now();
		const served = allServed(h, renewed);
		for (const c of renewed) {
			const temp = join(source, `.${c.name}.pem.new`);
			await writeFile(temp, c.leaf.combinedPem, { mode: 0o600 });
			await rename(temp, join(source, `${c.name}.pem`));
		}
		await served;
		const wallS = seconds(started);
		// Untimed: the cycle that served the last name finishes after its probes.
		await d.waitForLog(/cycle finished/, { from, timeoutMs: 60_000 });
		const cpuS = cpuSeconds(d.child.pid!) - cpu0;
		let profile: string | undefined;
		if (cpuProfDir) {
			// The profile is written at a clean exit only.
			d.signal("SIGTERM");
			await d.exited;
			profile = await summariseInto(cpuProfDir, d.child.pid ?? 0);
		}
		return {
			variant: "daemon",
			wallS,
			cpuS,
			...(profile ? { profile } : {}),
			cycles: d.logs
				.slice(from)
				.filter((l) => l.msg === "cycle finished")
				.map((l) => ({ writes: Number(l.writes), durationMs: Number(l.durationMs) })),
		};
	} finally {
		await d.stop();
		await h.stop();
	}
}

/** Summarises the daemon's profile in `dir` (its work after the last idle gap: the wait) into `dir`/summary.md. */
async function summariseInto(dir: string, pid: number): Promise<string> {
	const summary = join(dir, "summary.md");
	const table = selfTimeMarkdown(
		busiestProfile(dir, pid),
		"certificatee run during the served wait: self time (node --cpu-prof)",
		25,
		{ afterIdleGapMs: 1500 },
	);
	await writeFile(
		summary,
		`${table}\nThe window is the daemon's work after its last idle gap of 1.5 s or more: the cycles during the wait, not its start and first convergence.\n`,
	);
	return summary;
}

async function reload(base: PoolCert[], renewed: PoolCert[]): Promise<Run> {
	const h = await startHaproxy({ crtDir: crtDirFiles(base) });
	try {
		await masterReady(h);
		const started = performance.now();
		const served = allServed(h, renewed);
		for (const c of renewed) {
			const path = join(h.crtDir, `${c.name}.pem`);
			await writeFile(`${path}.tmp`, c.leaf.combinedPem, { mode: 0o600 });
			await rename(`${path}.tmp`, path);
		}
		process.kill(h.masterPid, "SIGUSR2");
		await served;
		return { variant: "reload", wallS: seconds(started) };
	} finally {
		await h.stop();
	}
}

export async function served(o: ServedOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	await ensureBuilt();
	const scratch = await mkdtemp(join(tmpdir(), "certificatee-bench-served-"));
	try {
		const base = await makeCerts(o.certs);
		const fresh = await makeCerts(o.roll);
		// The renewed certificates keep the names of the first K loaded ones.
		const renewed = fresh.map((c, i) => ({ ...c, name: base[i]!.name, sni: base[i]!.sni }));
		const fl = await floor(base, renewed);
		const dm = await daemon(base, renewed, scratch, o.cpuProfDir);
		const rl = await reload(base, renewed);
		const rows: Row[] = [
			{
				metric: "time to served, K names (s)",
				variant: "certificatee run (directory source → haproxy-runtime)",
				baselineName: "write + reload (SIGUSR2)",
				certificatee: dm.wallS,
				baseline: rl.wallS,
				ratio: ratio(rl.wallS, dm.wallS),
			},
			{
				metric: "time to served, K names (s)",
				variant: "certificatee run (directory source → haproxy-runtime)",
				baselineName: "bare-socket floor (durable writes + set/commit, one connection)",
				certificatee: dm.wallS,
				baseline: fl.wallS,
				ratio: ratio(fl.wallS, dm.wallS),
				note: "floor / certificatee: 1 is the physical limit; the goal is ≥ 0.5",
			},
		];
		return {
			scenario: "served",
			title: "Time to served (renewed files dropped into a running daemon's source)",
			parameters: { N_certs_loaded: o.certs, K_renewed: o.roll, key: "ECDSA P-256" },
			rows,
			notes: [
				`floor ${fl.wallS.toFixed(2)} s, certificatee ${dm.wallS.toFixed(2)} s (its CPU ${dm.cpuS?.toFixed(2)} s; cycles during the wait: ${(dm.cycles ?? []).map((c) => `${c.writes} writes in ${(c.durationMs / 1000).toFixed(2)} s`).join(", ") || "none"}), reload ${rl.wallS.toFixed(2)} s.`,
				"Each variant on a fresh HAProxy (Debian 2.6, master-worker) loaded with the same N certificates; the clock runs from the first file write until the last of the K names serves its new serial (4 TLS pollers by SNI, started with the work).",
				"The daemon had converged and been idle > 2 s (its directory source caches parsed files by identity); debounce 100 ms.",
				...(dm.profile ? [`Daemon CPU profile summary (self time during the wait): ${dm.profile}`] : []),
			],
			durationS: seconds(t0),
		};
	} finally {
		await rm(scratch, { recursive: true, force: true });
	}
}
