/**
 * Scenario: a fleet of Data Plane API endpoints (issue 24, goal 3; issue 12 before). E real HAProxy processes, each loading the
 * same C-file storage directory (as a fleet sharing one storage_dir path does), each behind a Data Plane API
 * STAND-IN (bench/lib/dpapi-standin.ts: the double's handlers, reads from memory, several processes), one
 * haproxy-dataplane target over all E endpoints run by `runCycle` in its own process (fleet-child.ts).
 * `cycles` no-op sync cycles: wall time, certificatee's CPU and memory per cycle (RSS, heap after a
 * collection), write requests counted by the stand-ins; then one certificate renewed: time until every node
 * serves it (TLS probes by SNI from this process). The goals stand beside each figure.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pLimit from "p-limit";
import { parseBundle } from "../../src/certificates/index.js";
import { probeServed } from "../../src/probe/index.js";
import { issueTestLeaf } from "../../test/harness/certs.js";
import { freePort, type Haproxy, startHaproxy } from "../../test/harness/haproxy.js";
import { bundleScript } from "../lib/bundle.js";
import { busiestProfile, selfTimeMarkdown } from "../lib/cpuprofile.js";
import { type Standins, spawnStandins } from "../lib/dpapi-standin.js";
import { memoryProbe, whereLine } from "../lib/memory-where.js";
import { benchCa, crtDirFiles, makeCerts } from "../lib/pool.js";
import { cpuSeconds, familyRssMiB, median, seconds } from "../lib/proc.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";
import type { CycleLine, FleetJob } from "./fleet-child.js";

export interface FleetOptions {
	endpoints: number;
	certs: number;
	cycles: number;
	/** Stand-in processes the endpoints are spread over. */
	standins: number;
	/** Write a V8 CPU profile of certificatee's process here (node --cpu-prof) and its summary beside it. */
	cpuProfDir?: string;
}

/** Issue 24, goal 3 (issue 12 asked < 30 s for the no-op cycle). */
export const FLEET_GOALS = { cycleS: 10, rssMiB: 250, servedS: 10 } as const;
/**
 * The target's full_observation_every (its default). Cycle 1 GETs every item of every endpoint; after it the
 * endpoints' scheduled full observations are spread (targets/haproxy/engine/full-schedule.ts): each cycle, a
 * tenth of them GET every item and the rest read the listings and what was written.
 */
const FULL_EVERY = 10;

const WRITE_OPS = /^(create|replace|delete|add|clear)/;
const USERNAME = "admin";
const PASSWORD = "standin-password";
const childScript = fileURLToPath(new URL("./fleet-child.ts", import.meta.url));

function vmHwmMiB(pid: number): number {
	try {
		const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
		return m ? Number(m[1]) / 1024 : 0;
	} catch {
		return 0;
	}
}

const writesIn = (counts: Record<string, number>) =>
	Object.entries(counts)
		.filter(([op]) => WRITE_OPS.test(op))
		.reduce((n, [, c]) => n + c, 0);

/** HAProxy nodes with a second frontend that loads `shared` (the storage dir) on its own TLS port. */
async function startNodes(count: number, shared: string): Promise<Array<{ h: Haproxy; probe: string }>> {
	const nodes: Array<{ h: Haproxy; probe: string }> = [];
	const limit = pLimit(2);
	await Promise.all(
		Array.from({ length: count }, () =>
			limit(async () => {
				const port = await freePort();
				const h = await startHaproxy({
					extraConfig: [
						"frontend fe_fleet",
						`    bind 127.0.0.1:${port} ssl crt ${shared}`,
						'    http-request return status 200 content-type text/plain string "ok\\n"',
					].join("\n"),
				});
				nodes.push({ h, probe: `127.0.0.1:${port}` });
			}),
		),
	);
	return nodes;
}

/** Polls every node until it serves `serial` for `sni`; the epoch ms at which the last one did. */
async function servedByAll(probes: readonly string[], sni: string, serial: string, deadlineMs: number) {
	const pending = new Set(probes);
	const limit = pLimit(8);
	let last = Date.now();
	for (let round = 0; pending.size > 0 && Date.now() < deadlineMs; round++) {
		// A short pause between rounds, so the probes do not take the cores from the cycle they time.
		if (round > 0) await sleep(50);
		await Promise.all(
			[...pending].map((address) =>
				limit(async () => {
					const served = await probeServed({
						address,
						sni,
						signal: new AbortController().signal,
						timeoutMs: 2_000,
					}).catch(() => undefined);
					if (served?.serial === serial) {
						pending.delete(address);
						last = Date.now();
					}
				}),
			),
		);
	}
	return { lastAt: last, missing: pending.size };
}

export async function fleet(o: FleetOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	const rows: Row[] = [];
	const notes: string[] = [];
	const scratch = await mkdtemp(join(tmpdir(), "certificatee-bench-fleet-"));
	const shared = join(scratch, "certs");
	await mkdir(shared);
	const certs = await makeCerts(o.certs);
	for (const [f, pem] of Object.entries(crtDirFiles(certs)))
		await writeFile(join(shared, f), pem, { mode: 0o600 });
	let nodes: Array<{ h: Haproxy; probe: string }> = [];
	let standins: Standins | undefined;
	try {
		const started = performance.now();
		nodes = await startNodes(o.endpoints, shared);
		const haproxyStartS = seconds(started);
		const haproxyRssMiB = nodes.reduce((n, x) => n + familyRssMiB(x.h.masterPid), 0);
		const warm = performance.now();
		standins = await spawnStandins(
			nodes.map(({ h }) => ({
				adminSocket: h.adminSocket,
				// dataplaneapi in master-worker mode (master_runtime): the endpoints say so (master_runtime: true).
				masterSocket: h.masterSocket,
				haproxyDir: h.dir,
				storageDir: shared,
			})),
			{
				processes: o.standins,
				username: USERNAME,
				password: PASSWORD,
				scratch,
				...(o.cpuProfDir
					? { execArgv: ["--cpu-prof", "--cpu-prof-dir", join(o.cpuProfDir, "standins")] }
					: {}),
			},
		);
		const standinWarmS = seconds(warm);

		const renewedFile = join(scratch, "renewed.pem");
		const renewedName = certs[0]!.name;
		const renewedLeaf = await issueTestLeaf(await benchCa(), { names: [certs[0]!.sni] });
		await writeFile(renewedFile, renewedLeaf.combinedPem, { mode: 0o600 });
		const renewedSerial = parseBundle({ combined: renewedLeaf.combinedPem }, { source: renewedName }).leaf
			.serial;
		const job: FleetJob = {
			endpoints: standins.urls.map((url, i) => ({
				name: `lb${i}`,
				url,
				username: USERNAME,
				password: PASSWORD,
				master_runtime: true,
			})),
			storageDir: shared,
			certDir: shared,
			cycles: o.cycles,
			renewed: { name: renewedName, file: renewedFile },
			memoryProbe,
		};
		const jobFile = join(scratch, "job.json");
		await writeFile(jobFile, JSON.stringify(job));

		const cpuOf = (pids: readonly number[]) => pids.reduce((n, pid) => n + cpuSeconds(pid), 0);
		const workers = await Promise.all(nodes.map(({ h }) => h.workerPid()));
		const standinCpu0 = cpuOf(standins.pids);
		const haproxyCpu0 = cpuOf(workers);
		const prof = o.cpuProfDir ? ["--cpu-prof", "--cpu-prof-dir", o.cpuProfDir] : [];
		const bundled = await bundleScript(childScript, scratch, "fleet-child");
		// FLEET_NODE_FLAGS: V8 flags for certificatee's process, to measure their effect (none by default).
		const flags = (process.env.FLEET_NODE_FLAGS ?? "").split(/\s+/).filter((f) => f !== "");
		if (flags.length > 0) notes.push(`certificatee's process ran with ${flags.join(" ")}.`);
		const child = spawn(process.execPath, ["--expose-gc", ...flags, ...prof, bundled, jobFile], {
			stdio: ["pipe", "pipe", "inherit"],
		});
		const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
		const cycles: CycleLine[] = [];
		let loaded: { rssBeforeMiB: number; rssLoadedMiB: number } | undefined;
		let done: { rssPeakMiB: number; cpuTotalS: number } | undefined;
		let renewDone:
			| {
					wallS: number;
					cpuS: number;
					steps: number;
					stepsOk: number;
					failedEndpoints: number;
					errors: string[];
			  }
			| undefined;
		let noop: { writes: number; reads: number; standinCpuS: number; haproxyCpuS: number } | undefined;
		let served: { s: number; missing: number } | undefined;
		const lines = createInterface({ input: child.stdout });
		for await (const text of lines) {
			const m = JSON.parse(text) as Record<string, unknown>;
			if (m.loaded) loaded = m as typeof loaded;
			else if (typeof m.cycle === "number") {
				const c = m as unknown as CycleLine;
				cycles.push(c);
				console.log(
					`  fleet cycle ${c.cycle}: ${c.wallS.toFixed(2)} s, certificatee CPU ${c.cpuS.toFixed(2)} s, RSS ${c.rssMiB.toFixed(0)} MiB, heap after GC ${c.heapMiB?.toFixed(0)} MiB, peak heap total/used ${c.heapTotalPeakMiB.toFixed(0)}/${c.heapUsedPeakMiB.toFixed(0)} MiB, external ${c.externalPeakMiB.toFixed(0)} MiB, steps ${c.steps}, failed endpoints ${c.failedEndpoints}`,
				);
			} else if (m.noopDone) {
				const counts = await standins.counts();
				noop = {
					writes: writesIn(counts),
					reads: Object.entries(counts)
						.filter(([op]) => !WRITE_OPS.test(op))
						.reduce((n, [, c]) => n + c, 0),
					standinCpuS: cpuOf(standins.pids) - standinCpu0,
					haproxyCpuS: cpuOf(workers) - haproxyCpu0,
				};
				child.stdin.write("renew\n");
			} else if (m.renewStart) {
				const at = m.at as number;
				const probed = await servedByAll(
					nodes.map((n) => n.probe),
					certs[0]!.sni,
					renewedSerial,
					at + 600_000,
				);
				served = { s: (probed.lastAt - at) / 1000, missing: probed.missing };
			} else if (m.renewDone) renewDone = m as typeof renewDone;
			else if (m.done) done = m as typeof done;
		}
		const code = await exited;
		if (code !== 0 || done === undefined || noop === undefined) throw new Error(`fleet child exited ${code}`);
		if (o.cpuProfDir) {
			const summary = join(o.cpuProfDir, "fleet-child-profile.md");
			// One profile per thread (tsx's loader runs on its own): the main thread's is the busiest.
			await writeFile(
				summary,
				selfTimeMarkdown(
					busiestProfile(o.cpuProfDir, child.pid ?? 0),
					`certificatee's process, fleet ${o.endpoints} × ${o.certs}, ${o.cycles} no-op cycles + 1 renewal`,
				),
			);
			notes.push(`CPU profile of certificatee's process: ${summary} (top self-time functions).`);
		}
		const standinPeakMiB = standins.pids.reduce((n, pid) => n + vmHwmMiB(pid), 0);

		const label = `${o.endpoints} endpoints × ${o.certs} certs`;
		const failedEndpoints = Math.max(...cycles.map((c) => c.failedEndpoints));
		const valid = failedEndpoints === 0;
		const goal = (figure: number | undefined, limit: number, unit: string): Partial<Row> => ({
			baselineName: `goal (issue 24): < ${limit} ${unit}`,
			baseline: limit,
			...(figure === undefined ? {} : { ratio: limit / figure }),
		});
		const wall = cycles.map((c) => c.wallS);
		const first = cycles.filter((c) => c.cycle === 1);
		const steady = cycles.filter((c) => c.cycle > 1);
		const at = (n: number) => cycles[Math.min(n, cycles.length) - 1];
		const early = at(5);
		const lastCycle = cycles.at(-1);
		rows.push(
			{
				metric: `no-op cycle, ${label}: wall (s), median of ${cycles.length}`,
				variant: "dataplane target (8 endpoints at once, 16 GETs each)",
				...(valid ? { certificatee: median(wall) } : {}),
				...goal(valid ? median(wall) : undefined, FLEET_GOALS.cycleS, "s"),
				note: valid ? `max ${Math.max(...wall).toFixed(2)} s` : "not valid: endpoints failed",
			} as Row,
			{
				metric: `no-op cycle after the first (incremental, 1/${FULL_EVERY} of the endpoints in full by schedule): wall (s), median`,
				variant: `cycles 2–${steady.at(-1)?.cycle ?? 2}`,
				...(steady.length > 0 ? { certificatee: median(steady.map((c) => c.wallS)) } : {}),
				baselineName:
					"full observation of every endpoint (cycle 1: every item GET, as every cycle was before)",
				baseline: median(first.map((c) => c.wallS)),
				ratio: ratio(median(first.map((c) => c.wallS)), median(steady.map((c) => c.wallS))),
				note: `max ${steady.length > 0 ? Math.max(...steady.map((c) => c.wallS)).toFixed(2) : "–"} s; CPU ${median(steady.map((c) => c.cpuS))?.toFixed(2) ?? "–"} s vs ${median(first.map((c) => c.cpuS))?.toFixed(2) ?? "–"} s`,
			} as Row,
			{
				metric: "no-op cycle: certificatee CPU (s), median",
				variant: "certificatee's own process",
				certificatee: median(cycles.map((c) => c.cpuS)),
				baselineName: "–",
			},
			{
				metric: "certificatee peak RSS (MiB), whole run",
				variant: "own process, desired set included",
				certificatee: done.rssPeakMiB,
				...goal(done.rssPeakMiB, FLEET_GOALS.rssMiB, "MiB"),
			} as Row,
			{
				metric: `RSS growth, cycle ${early?.cycle} → ${lastCycle?.cycle} (MiB)`,
				variant: "RSS at the end of each cycle",
				certificatee: (lastCycle?.rssMiB ?? 0) - (early?.rssMiB ?? 0),
				baselineName: "goal: no growth",
			},
			{
				metric: `heap after GC growth, cycle ${early?.cycle} → ${lastCycle?.cycle} (MiB)`,
				variant: "heapUsed after a full collection",
				certificatee: (lastCycle?.heapMiB ?? 0) - (early?.heapMiB ?? 0),
				baselineName: "goal: no growth",
			},
			{
				metric: `write requests in ${cycles.length} no-op cycles`,
				variant: "counted by the stand-ins",
				certificatee: noop.writes,
				baselineName: "goal: 0",
				baseline: 0,
			},
			{
				metric: "failed endpoints (worst cycle)",
				variant: "must be 0",
				certificatee: failedEndpoints,
				baselineName: "–",
				...(cycles.some((c) => c.errors.length > 0)
					? { note: [...new Set(cycles.flatMap((c) => c.errors))].join(" | ").slice(0, 300) }
					: {}),
			},
			{
				metric: `1 renewed certificate served by all ${o.endpoints} nodes (s)`,
				variant: "from the cycle's start to the last node's TLS probe",
				...(served && served.missing === 0 ? { certificatee: served.s } : {}),
				...goal(served && served.missing === 0 ? served.s : undefined, FLEET_GOALS.servedS, "s"),
				note:
					served === undefined
						? "not measured"
						: served.missing > 0
							? `${served.missing} nodes never served it`
							: `cycle ${renewDone?.wallS.toFixed(2)} s, ${renewDone?.stepsOk}/${renewDone?.steps} writes ok`,
			} as Row,
			{
				metric: `stand-ins' CPU over the ${cycles.length} no-op cycles (s)`,
				variant: `${standins.pids.length} stand-in processes (not certificatee)`,
				certificatee: noop.standinCpuS,
				baselineName: "certificatee's CPU, same cycles",
				baseline: cycles.reduce((n, c) => n + c.cpuS, 0),
			},
		);
		notes.push(
			`STAND-IN, not a Data Plane API: each endpoint is served by bench/lib/dpapi-standin.ts, which answers with the spec-validating double's own handlers but without its validation, reads from memory (runtime answers read from the real HAProxy once and after every write or worker change; storage answers kept per file identity) — so the figures are certificatee's own cost. ${standins.pids.length} stand-in processes, warm in ${standinWarmS.toFixed(1)} s; their CPU ${noop.standinCpuS.toFixed(1)} s and peak RSS ${standinPeakMiB.toFixed(0)} MiB (sum) are not certificatee's; ${noop.reads} read requests answered in the no-op cycles.`,
			`${nodes.length} real HAProxy processes (Debian 2.6.12, master-worker), each loading the same ${o.certs}-file storage directory on its own TLS port, started 2 at a time in ${haproxyStartS.toFixed(0)} s; RSS ${haproxyRssMiB.toFixed(0)} MiB (masters + workers, shared pages counted in each); workers' CPU during the no-op cycles ${noop.haproxyCpuS.toFixed(1)} s.`,
			`certificatee: one haproxy-dataplane target over all ${o.endpoints} endpoints in its own process, run as plain JavaScript (bench/scenarios/fleet-child.ts bundled by esbuild, no tsx loader) (RSS ${loaded?.rssBeforeMiB.toFixed(0)} MiB at start, ${loaded?.rssLoadedMiB.toFixed(0)} MiB with the ${o.certs} desired certificates parsed); cycles ${wall.map((w) => w.toFixed(1)).join(" / ")} s; CPU ${cycles.map((c) => c.cpuS.toFixed(1)).join(" / ")} s; RSS at cycle end ${cycles.map((c) => c.rssMiB.toFixed(0)).join(" / ")} MiB; heap after GC ${cycles.map((c) => c.heapMiB?.toFixed(0) ?? "?").join(" / ")} MiB; total CPU of the process ${done.cpuTotalS.toFixed(1)} s.`,
			...(lastCycle?.where
				? [
						`Where certificatee's RSS is after the last no-op cycle's collection: ${whereLine(lastCycle.rssMiB * 2 ** 20, lastCycle.where)}.`,
					]
				: []),
			`Renewal: a new leaf for ${certs[0]!.sni} replaces the desired one; one sync cycle (${renewDone?.wallS.toFixed(2)} s, CPU ${renewDone?.cpuS.toFixed(2)} s, failed endpoints ${renewDone?.failedEndpoints}${renewDone?.errors.length ? `, ${renewDone.errors.join(" | ")}` : ""}); this process probes every node's TLS port by SNI (8 at a time, repeated) until each serves the new serial.`,
		);
	} finally {
		await standins?.close().catch(() => undefined);
		await Promise.all(nodes.map(({ h }) => h.stop()));
		await rm(scratch, { recursive: true, force: true });
	}
	return {
		scenario: "fleet",
		title: "Fleet: Data Plane API endpoints (stand-ins) × certificates",
		parameters: { endpoints: o.endpoints, certs: o.certs, cycles: o.cycles, standin_processes: o.standins },
		rows,
		notes,
		durationS: seconds(t0),
	};
}
