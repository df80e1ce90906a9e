/**
 * Scenario "fleet-socket" (issue 24, goal 2): E real HAProxy processes, each loading the same N certificates
 * from its own crt directory, and ONE `certificatee run` with a directory source of those N files and E
 * haproxy-runtime targets (one per process: its admin socket and crt_dir).
 *
 *   no-op cycles   the daemon's own "cycle finished" durations and writes (interval 1 s, so they come back to back);
 *   peak RSS       the daemon's VmHWM over the whole run up to the renewal (first convergence included);
 *   served         one renewed file renamed into the source right after a cycle ended; the clock runs from the
 *                  rename until the last of the E nodes serves the new serial (TLS probes by SNI from this process);
 *   heap           then `cycles` more cycles, each followed by a full collection in the daemon (SIGUSR2 to the
 *                  preloaded bench/lib/memory-probe.cjs): heapUsed after GC must stay flat;
 *   baseline       with the daemon stopped, a bare socket loop pushes another renewal of the same name to the E
 *                  nodes (durable file write + `set ssl cert` / `commit ssl cert` on an open connection per node,
 *                  all nodes at once), timed by the same probes.
 */
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, open, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pLimit from "p-limit";
import { probeServed } from "../../src/probe/index.js";
import { issueTestLeaf } from "../../test/harness/certs.js";
import { ensureBuilt, type LogLine, spawnCertificatee } from "../../test/harness/cli.js";
import { freePort, type Haproxy, startHaproxy } from "../../test/harness/haproxy.js";
import { busiestProfile, selfTimeMarkdown } from "../lib/cpuprofile.js";
import { heapMarkdown, summariseHeap } from "../lib/heapsnapshot.js";
import { benchCa, cachedCerts, crtDirFiles } from "../lib/pool.js";
import { cpuSeconds, familyRssMiB, median, seconds } from "../lib/proc.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";

export interface SocketFleetOptions {
	nodes: number;
	certs: number;
	/** No-op cycles timed before the renewal. */
	noopCycles: number;
	/** Cycles after the renewal, each followed by a full collection: the heap's flatness. */
	heapCycles: number;
	/** Profile the daemon (node --cpu-prof) into this directory and summarise it there. */
	cpuProfDir?: string;
	/** Heap snapshots of the daemon after the first and the last heap cycle, summed up there (heap-summary.md). */
	heapSnapshotDir?: string;
}

/** Issue 24, goal 2. */
export const SOCKET_FLEET_GOALS = { cycleS: 1, rssMiB: 250, servedS: 1, servedOverLoop: 10 } as const;

const MIB = 2 ** 20;
const memoryProbe = fileURLToPath(new URL("../lib/memory-probe.cjs", import.meta.url));

function statusKiB(pid: number, field: "VmHWM" | "VmRSS"): number {
	try {
		const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
		return m ? Number(m[1]) : 0;
	} catch {
		return 0;
	}
}
const statusMiB = (pid: number, field: "VmHWM" | "VmRSS") => statusKiB(pid, field) / 1024;

async function startNodes(count: number, files: Record<string, string>): Promise<Haproxy[]> {
	const nodes: Haproxy[] = [];
	const limit = pLimit(2);
	await Promise.all(
		Array.from({ length: count }, () =>
			limit(async () => {
				// On a machine loaded enough, a start can miss the harness's deadline: try again, twice.
				for (let attempt = 1; ; attempt++) {
					try {
						nodes.push(await startHaproxy({ crtDir: files }));
						return;
					} catch (e) {
						if (attempt === 3) throw e;
					}
				}
			}),
		),
	);
	return nodes;
}

/** Polls every node (8 probes at once, rounds 20 ms apart) until it serves `serial` for `sni`; when the last did. */
async function servedByAll(nodes: readonly Haproxy[], sni: string, serial: string, timeoutMs = 120_000) {
	const want = serial.toUpperCase().replace(/^0+(?=.)/, "");
	const pending = new Set(nodes.map((n) => n.address));
	const limit = pLimit(8);
	const deadline = performance.now() + timeoutMs;
	let lastAt = performance.now();
	let probes = 0;
	for (let round = 0; pending.size > 0; round++) {
		if (performance.now() > deadline) throw new Error(`${pending.size} nodes never served ${sni} ${serial}`);
		if (round > 0) await sleep(20);
		await Promise.all(
			[...pending].map((address) =>
				limit(async () => {
					probes += 1;
					const served = await probeServed({ address, sni, timeoutMs: 2_000 }).catch(() => undefined);
					if (served && served.serial.toUpperCase().replace(/^0+(?=.)/, "") === want) {
						pending.delete(address);
						lastAt = performance.now();
					}
				}),
			),
		);
	}
	return { lastAt, probes };
}

/** One connection in HAProxy's interactive mode: a command per line, each answer ends with the prompt. */
async function socketSession(path: string) {
	const socket = createConnection(path);
	await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
	let buffer = "";
	let waiter: (() => void) | undefined;
	socket.on("data", (d) => {
		buffer += d.toString("utf8");
		waiter?.();
	});
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
	socket.write("prompt\n");
	await answer().catch(() => "");
	return {
		async command(line: string): Promise<string> {
			socket.write(`${line}\n`);
			return answer();
		},
		close: () => socket.end(),
	};
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
	const d = await open(dirname(path), "r");
	await d.sync();
	await d.close();
}

/** The baseline: the same renewal pushed to every node by hand, all nodes at once, one open connection each. */
async function bareLoop(nodes: readonly Haproxy[], file: string, pem: string, sni: string, serial: string) {
	const sessions = await Promise.all(nodes.map((h) => socketSession(h.adminSocket)));
	try {
		const started = performance.now();
		const served = servedByAll(nodes, sni, serial);
		await Promise.all(
			nodes.map(async (h, i) => {
				const path = join(h.crtDir, file);
				await durableWrite(path, pem);
				const session = sessions[i]!;
				const set = await session.command(`set ssl cert ${path} <<\n${pem.trimEnd()}\n`);
				if (!/Transaction (created|updated)/.test(set)) throw new Error(`set ssl cert ${path}: ${set}`);
				const commit = await session.command(`commit ssl cert ${path}`);
				if (!/Success!/.test(commit)) throw new Error(`commit ssl cert ${path}: ${commit}`);
			}),
		);
		const pushedS = seconds(started);
		const { lastAt, probes } = await served;
		return { servedS: (lastAt - started) / 1000, pushedS, probes };
	} finally {
		for (const s of sessions) s.close();
	}
}

interface MemoryLine {
	at: number;
	collected: boolean;
	before: NodeJS.MemoryUsage;
	after: NodeJS.MemoryUsage;
	snapshot?: string;
}

export async function socketFleet(o: SocketFleetOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	await ensureBuilt();
	const scratch = await mkdtemp(join(tmpdir(), "certificatee-bench-fleet-socket-"));
	const notes: string[] = [];
	let nodes: Haproxy[] = [];
	try {
		const made = performance.now();
		const certs = await cachedCerts(o.certs);
		const certsS = seconds(made);
		const files = crtDirFiles(certs);
		const started = performance.now();
		nodes = await startNodes(o.nodes, files);
		const haproxyStartS = seconds(started);
		const haproxyRssMiB = nodes.reduce((n, h) => n + familyRssMiB(h.masterPid), 0);
		console.log(
			`  fleet-socket: ${o.nodes} HAProxy × ${o.certs} certificates up in ${haproxyStartS.toFixed(0)} s`,
		);

		const source = join(scratch, "source");
		await mkdir(source);
		for (const [f, pem] of Object.entries(files)) await writeFile(join(source, f), pem, { mode: 0o600 });
		const config = join(scratch, "certificatee.yaml");
		await writeFile(
			config,
			[
				`state_dir: ${join(scratch, "state")}`,
				// Back-to-back cycles (the loop waits at least 1 s between two).
				"interval: 1s",
				`listen: 127.0.0.1:${await freePort()}`,
				"sources:",
				`  - { name: files, type: directory, path: ${source}, debounce: 100ms }`,
				"targets:",
				...nodes.map(
					(h, i) =>
						`  - { name: lb${i}, type: haproxy-runtime, socket: ${h.adminSocket}, crt_dir: ${h.crtDir} }`,
				),
			].join("\n"),
		);
		const memoryFile = join(scratch, "memory.jsonl");
		if (o.cpuProfDir) await mkdir(o.cpuProfDir, { recursive: true });
		if (o.heapSnapshotDir) await mkdir(o.heapSnapshotDir, { recursive: true });
		const d = spawnCertificatee(["run", "--config", config], {
			nodeArgs: [
				"--expose-gc",
				"--require",
				memoryProbe,
				...(o.cpuProfDir ? ["--cpu-prof", `--cpu-prof-dir=${o.cpuProfDir}`] : []),
			],
			env: {
				CERTIFICATEE_BENCH_MEMORY: memoryFile,
				...(o.heapSnapshotDir
					? {
							CERTIFICATEE_BENCH_HEAPSNAPSHOT: o.heapSnapshotDir,
							CERTIFICATEE_BENCH_HEAPSNAPSHOT_AT: `1,${o.heapCycles}`,
						}
					: {}),
			},
		});
		const pid = d.child.pid!;
		let seen = 0;
		const nextCycle = async (timeoutMs = 600_000): Promise<LogLine> => {
			const line = await d.waitForLog(/^cycle finished$/, { from: seen, timeoutMs });
			seen = d.logs.indexOf(line) + 1;
			return line;
		};
		const memoryLines = async (): Promise<MemoryLine[]> =>
			(await readFile(memoryFile, "utf8").catch(() => ""))
				.split("\n")
				.filter((l) => l !== "")
				.map((l) => JSON.parse(l) as MemoryLine);
		const rssTimeline: Array<{ phase: string; rssMiB: number; hwmMiB: number }> = [];
		const mark = (phase: string) =>
			rssTimeline.push({ phase, rssMiB: statusMiB(pid, "VmRSS"), hwmMiB: statusMiB(pid, "VmHWM") });
		try {
			mark("started");
			const first = await nextCycle();
			mark("converged");
			console.log(
				`  fleet-socket: first cycle ${(Number(first.durationMs) / 1000).toFixed(2)} s, ${first.writes} writes, RSS ${statusMiB(pid, "VmRSS").toFixed(0)} MiB`,
			);
			const noop: Array<{ s: number; writes: number; cpuS: number; rssMiB: number }> = [];
			let cpuBefore = cpuSeconds(pid);
			for (let i = 0; i < o.noopCycles; i++) {
				const line = await nextCycle();
				const cpu = cpuSeconds(pid);
				noop.push({
					s: Number(line.durationMs) / 1000,
					writes: Number(line.writes),
					cpuS: cpu - cpuBefore,
					rssMiB: statusMiB(pid, "VmRSS"),
				});
				cpuBefore = cpu;
				console.log(
					`  fleet-socket: no-op cycle ${i + 1}: ${noop.at(-1)!.s.toFixed(2)} s, ${line.writes} writes, RSS ${noop.at(-1)!.rssMiB.toFixed(0)} MiB`,
				);
			}
			mark("no-op cycles");

			// The renewal: right after a cycle ends (the daemon then waits ≥ 1 s), so it is not folded into one in flight.
			const renewed = await issueTestLeaf(await benchCa(), { names: [certs[0]!.sni] });
			// Written beside the source (same file system), so the source's watch sees only the rename.
			const temp = join(scratch, `${certs[0]!.name}.pem.new`);
			await writeFile(temp, renewed.combinedPem, { mode: 0o600 });
			await nextCycle();
			const cpuRenew0 = cpuSeconds(pid);
			await rename(temp, join(source, `${certs[0]!.name}.pem`));
			const landed = performance.now();
			const probed = await servedByAll(nodes, certs[0]!.sni, renewed.serial);
			const servedS = (probed.lastAt - landed) / 1000;
			let renewalLine = await nextCycle();
			for (let i = 0; Number(renewalLine.writes) === 0 && i < 5; i++) renewalLine = await nextCycle();
			const renewCpuS = cpuSeconds(pid) - cpuRenew0;
			mark("renewal");
			const peakBeforeHeapPhase = statusMiB(pid, "VmHWM");
			console.log(
				`  fleet-socket: renewal served by all ${o.nodes} in ${servedS.toFixed(2)} s (cycle ${(Number(renewalLine.durationMs) / 1000).toFixed(2)} s, ${renewalLine.writes} writes)`,
			);

			// The heap over more cycles: a full collection after each, between cycles.
			const heap: Array<{
				heapMiB: number;
				heapTotalMiB: number;
				rssMiB: number;
				externalMiB: number;
				s: number;
				writes: number;
			}> = [];
			for (let i = 0; i < o.heapCycles; i++) {
				const line = await nextCycle();
				const before = (await memoryLines()).length;
				d.signal("SIGUSR2");
				// A heap snapshot of a large daemon takes tens of seconds on a loaded machine.
				const deadline = performance.now() + 300_000;
				let lines = await memoryLines();
				while (lines.length === before && performance.now() < deadline) {
					await sleep(10);
					lines = await memoryLines();
				}
				const m = lines.at(-1);
				if (!m) throw new Error("the daemon's memory probe did not answer SIGUSR2");
				heap.push({
					heapMiB: m.after.heapUsed / MIB,
					heapTotalMiB: m.after.heapTotal / MIB,
					rssMiB: m.after.rss / MIB,
					externalMiB: (m.after.external + m.after.arrayBuffers) / MIB,
					s: Number(line.durationMs) / 1000,
					writes: Number(line.writes),
				});
			}
			mark("heap cycles");
			const cpuTotalS = cpuSeconds(pid);
			d.signal("SIGTERM");
			await d.exited;
			let profile: string | undefined;
			if (o.cpuProfDir) {
				profile = join(o.cpuProfDir, "summary.md");
				await writeFile(
					profile,
					selfTimeMarkdown(
						busiestProfile(o.cpuProfDir, pid),
						`certificatee run, fleet-socket ${o.nodes} × ${o.certs}: self time over the whole run (node --cpu-prof)`,
						30,
					),
				);
			}

			if (o.heapSnapshotDir) {
				const summary = join(o.heapSnapshotDir, "heap-summary.md");
				const snaps = (await memoryLines()).flatMap((m) => (m.snapshot ? [m.snapshot] : []));
				await writeFile(
					summary,
					snaps
						.map((f, i) =>
							heapMarkdown(
								summariseHeap(f),
								`certificatee run, fleet-socket ${o.nodes} × ${o.certs}: heap after heap cycle ${i === 0 ? 1 : o.heapCycles} (after a full collection)`,
							),
						)
						.join("\n"),
				);
				notes.push(`Heap snapshots summed up in ${summary}.`);
			}

			// The baseline, with the daemon gone: another renewal of the same name, pushed by hand.
			const again = await issueTestLeaf(await benchCa(), { names: [certs[0]!.sni] });
			const loop = await bareLoop(
				nodes,
				`${certs[0]!.name}.pem`,
				again.combinedPem,
				certs[0]!.sni,
				again.serial,
			);

			const noopS = median(noop.map((c) => c.s));
			const noopWrites = noop.reduce((n, c) => n + c.writes, 0);
			const label = `${o.nodes} HAProxy × ${o.certs}`;
			const h0 = heap[Math.min(4, heap.length - 1)];
			const hLast = heap.at(-1);
			const rows: Row[] = [
				{
					metric: `no-op cycle, ${label} (s), median of ${noop.length}`,
					variant: `certificatee run, ${o.nodes} haproxy-runtime targets`,
					certificatee: noopS,
					baselineName: `goal (issue 24): < ${SOCKET_FLEET_GOALS.cycleS} s`,
					baseline: SOCKET_FLEET_GOALS.cycleS,
					ratio: ratio(SOCKET_FLEET_GOALS.cycleS, noopS),
					note: `max ${Math.max(...noop.map((c) => c.s)).toFixed(2)} s; CPU ${median(noop.map((c) => c.cpuS))?.toFixed(2)} s per cycle (cycle + the wait)`,
				},
				{
					metric: `writes in ${noop.length} no-op cycles`,
					variant: "the daemon's cycle lines",
					certificatee: noopWrites,
					baselineName: "goal: 0",
					baseline: 0,
				},
				{
					metric: "daemon peak RSS (MiB), start to renewal served",
					variant: "VmHWM of certificatee run",
					certificatee: peakBeforeHeapPhase,
					baselineName: `goal (issue 24): < ${SOCKET_FLEET_GOALS.rssMiB} MiB`,
					baseline: SOCKET_FLEET_GOALS.rssMiB,
					ratio: ratio(SOCKET_FLEET_GOALS.rssMiB, peakBeforeHeapPhase),
					note: rssTimeline.map((r) => `${r.phase} ${r.rssMiB.toFixed(0)}/${r.hwmMiB.toFixed(0)}`).join(", "),
				},
				{
					metric: `1 renewed file → served by all ${o.nodes} nodes (s)`,
					variant: "from the rename into the source to the last node's TLS probe",
					certificatee: servedS,
					baselineName: "bare socket loop, same run (durable write + set/commit, all nodes at once)",
					baseline: loop.servedS,
					ratio: ratio(loop.servedS, servedS),
					note: `goal < ${SOCKET_FLEET_GOALS.servedS} s and ≤ ${SOCKET_FLEET_GOALS.servedOverLoop}× the loop (ratio ≥ ${(1 / SOCKET_FLEET_GOALS.servedOverLoop).toFixed(1)}); the renewal cycle ${(Number(renewalLine.durationMs) / 1000).toFixed(2)} s, ${renewalLine.writes} writes`,
				},
				{
					metric: `heap after GC, cycle ${Math.min(5, heap.length)} → ${heap.length} after the renewal (MiB)`,
					variant: "heapUsed after a full collection",
					certificatee: hLast && h0 ? hLast.heapMiB - h0.heapMiB : undefined,
					baselineName: "goal: flat",
					note: heap.map((h) => h.heapMiB.toFixed(1)).join(" / "),
				},
			];
			notes.push(
				`${o.nodes} real HAProxy ${nodes[0]?.bin} processes (master-worker), each with its own crt directory of the same ${o.certs} ECDSA P-256 certificates (one shared key, cached in bench/.cache/: ${certsS.toFixed(1)} s to read or make), started 2 at a time in ${haproxyStartS.toFixed(0)} s; their RSS ${haproxyRssMiB.toFixed(0)} MiB (masters + workers).`,
				`One certificatee run (dist/cli/main.js, node ${process.version}): a directory source of the ${o.certs} files (debounce 100 ms), ${o.nodes} haproxy-runtime targets (admin socket and crt_dir; no probe: with one, every cycle would handshake every name on every node), interval 1 s. First convergence ${(Number(first.durationMs) / 1000).toFixed(2)} s, ${first.writes} writes.`,
				`No-op cycles: ${noop.map((c) => c.s.toFixed(2)).join(" / ")} s; CPU per cycle and wait ${noop.map((c) => c.cpuS.toFixed(2)).join(" / ")} s; RSS at each end ${noop.map((c) => c.rssMiB.toFixed(0)).join(" / ")} MiB.`,
				`Renewal: one new leaf renamed into the source right after a cycle ended; served by all ${o.nodes} nodes ${servedS.toFixed(3)} s after the rename (${probed.probes} probes); the daemon's CPU from the rename to the end of the renewal cycle ${renewCpuS.toFixed(2)} s. Bare loop: pushed in ${loop.pushedS.toFixed(3)} s, served by all in ${loop.servedS.toFixed(3)} s (${loop.probes} probes).`,
				`Heap cycles (a full collection after each): heapUsed ${heap.map((h) => h.heapMiB.toFixed(1)).join(" / ")} MiB (V8 heap committed ${heap.map((h) => h.heapTotalMiB.toFixed(0)).join(" / ")} MiB); RSS after it ${heap.map((h) => h.rssMiB.toFixed(0)).join(" / ")} MiB; external + array buffers ${heap.map((h) => h.externalMiB.toFixed(1)).join(" / ")} MiB; cycles ${heap.map((h) => h.s.toFixed(2)).join(" / ")} s, writes ${heap.reduce((n, h) => n + h.writes, 0)}. The daemon's total CPU ${cpuTotalS.toFixed(1)} s.`,
				"RSS timeline (VmRSS/VmHWM MiB at each phase's end): " +
					rssTimeline.map((r) => `${r.phase} ${r.rssMiB.toFixed(0)}/${r.hwmMiB.toFixed(0)}`).join(", "),
				"This process's probes (8 at a time, rounds 20 ms apart) share the 2 cores with the daemon and the HAProxy workers; both variants are timed by the same probes in the same run.",
				...(profile ? [`Daemon CPU profile summary: ${profile}`] : []),
			);
			return {
				scenario: "fleet-socket",
				title: "Fleet through the socket: real HAProxy × certificates, one daemon",
				parameters: {
					nodes: o.nodes,
					certs: o.certs,
					noop_cycles: o.noopCycles,
					heap_cycles: o.heapCycles,
					key: "ECDSA P-256 (one shared key)",
				},
				rows,
				notes,
				durationS: seconds(t0),
			};
		} finally {
			await d.stop();
		}
	} finally {
		await Promise.all(nodes.map((h) => h.stop()));
		await rm(scratch, { recursive: true, force: true });
	}
}
