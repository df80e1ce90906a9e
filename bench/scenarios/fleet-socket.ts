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
import pLimit from "p-limit";
import { probeServed } from "../../src/probe/index.js";
import { issueTestLeaf } from "../../test/harness/certs.js";
import { ensureBuilt, type LogLine, spawnCertificatee } from "../../test/harness/cli.js";
import { freePort, type Haproxy, startHaproxy } from "../../test/harness/haproxy.js";
import { busiestProfile, selfTimeMarkdown } from "../lib/cpuprofile.js";
import { heapMarkdown, summariseHeap } from "../lib/heapsnapshot.js";
import { type MemoryWhere, memoryProbe, whereLine } from "../lib/memory-where.js";
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
	/** Daemon variants run one after the other against the same nodes (default: one, as configured). */
	variants?: DaemonVariant[];
}

/** Issue 24, goal 2. */
export const SOCKET_FLEET_GOALS = { cycleS: 1, rssMiB: 250, servedS: 1, servedOverLoop: 10 } as const;

const MIB = 2 ** 20;

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
	/** Where the resident memory is after the collection (bytes; bench/lib/memory-probe.cjs). */
	where?: MemoryWhere;
	snapshot?: string;
}

/** How one daemon runs: its label, extra environment (MALLOC_ARENA_MAX=2) and node flags (--max-semi-space-size=…). */
export interface DaemonVariant {
	label: string;
	env: Record<string, string>;
	nodeArgs: string[];
}

/** `default;MALLOC_ARENA_MAX=2;--max-semi-space-size=8,MALLOC_ARENA_MAX=2`: one variant per `;`, parts by `,`. */
export function parseVariants(spec: string | undefined): DaemonVariant[] {
	if (spec === undefined || spec.trim() === "") return [{ label: "default", env: {}, nodeArgs: [] }];
	return spec.split(";").map((one) => {
		const label = one.trim();
		const env: Record<string, string> = {};
		const nodeArgs: string[] = [];
		for (const part of label === "default" ? [] : label.split(",")) {
			const p = part.trim();
			if (p.startsWith("--")) nodeArgs.push(p);
			else if (/^[A-Z_][A-Z0-9_]*=/.test(p)) env[p.slice(0, p.indexOf("="))] = p.slice(p.indexOf("=") + 1);
			else throw new Error(`--socket-variants: "${p}" is neither KEY=VALUE nor a --node-flag`);
		}
		return { label, env, nodeArgs };
	});
}

interface HeapLine {
	heapMiB: number;
	heapTotalMiB: number;
	rssMiB: number;
	externalMiB: number;
	s: number;
	writes: number;
	/** Where the RSS is after the collection (whereLine). */
	where?: string;
}

/** What one daemon variant measured against the running nodes. */
interface PhaseResult {
	variant: DaemonVariant;
	firstS: number;
	firstWrites: number;
	noop: Array<{ s: number; writes: number; cpuS: number; rssMiB: number }>;
	peakMiB: number;
	rssTimeline: Array<{ phase: string; rssMiB: number; hwmMiB: number }>;
	servedS: number;
	probes: number;
	renewalS: number;
	renewalWrites: number;
	renewCpuS: number;
	heap: HeapLine[];
	cpuTotalS: number;
	profile?: string;
	heapSummary?: string;
}

interface Fleet {
	nodes: readonly Haproxy[];
	certs: Awaited<ReturnType<typeof cachedCerts>>;
	source: string;
	scratch: string;
}

function configText(f: Fleet, stateDir: string, port: number): string {
	return [
		`state_dir: ${stateDir}`,
		// Back-to-back cycles (the loop waits at least 1 s between two).
		"interval: 1s",
		`listen: 127.0.0.1:${port}`,
		"sources:",
		`  - { name: files, type: directory, path: ${f.source}, debounce: 100ms }`,
		"targets:",
		...f.nodes.map(
			(h, i) => `  - { name: lb${i}, type: haproxy-runtime, socket: ${h.adminSocket}, crt_dir: ${h.crtDir} }`,
		),
	].join("\n");
}

/** One `certificatee run` against the running nodes: first convergence, no-op cycles, a renewal, heap cycles. */
async function daemonPhase(
	o: SocketFleetOptions,
	f: Fleet,
	v: DaemonVariant,
	index: number,
): Promise<PhaseResult> {
	const dir = join(f.scratch, `daemon-${index}`);
	await mkdir(dir);
	const config = join(dir, "certificatee.yaml");
	await writeFile(config, configText(f, join(dir, "state"), await freePort()));
	const memoryFile = join(dir, "memory.jsonl");
	const sub = (d: string | undefined) =>
		d && (o.variants?.length ?? 1) > 1 ? join(d, `variant-${index + 1}`) : d;
	const cpuProfDir = sub(o.cpuProfDir);
	const heapSnapshotDir = sub(o.heapSnapshotDir);
	if (cpuProfDir) await mkdir(cpuProfDir, { recursive: true });
	if (heapSnapshotDir) await mkdir(heapSnapshotDir, { recursive: true });
	const d = spawnCertificatee(["run", "--config", config], {
		nodeArgs: [
			"--expose-gc",
			"--require",
			memoryProbe,
			...v.nodeArgs,
			...(cpuProfDir ? ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`] : []),
		],
		env: {
			...v.env,
			CERTIFICATEE_BENCH_MEMORY: memoryFile,
			...(heapSnapshotDir
				? {
						CERTIFICATEE_BENCH_HEAPSNAPSHOT: heapSnapshotDir,
						CERTIFICATEE_BENCH_HEAPSNAPSHOT_AT: `1,${o.heapCycles}`,
					}
				: {}),
		},
	});
	const pid = d.child.pid!;
	const say = (line: string) => console.log(`  fleet-socket [${v.label}]: ${line}`);
	let seen = 0;
	const nextCycle = async (timeoutMs = 600_000): Promise<LogLine> => {
		const line = await d.waitForLog(/^cycle finished$/, { from: seen, timeoutMs });
		seen = d.logs.indexOf(line) + 1;
		return line;
	};
	// Only whole lines: the daemon may be writing the last one while it is read (it ends each with a newline).
	const memoryLines = async (): Promise<MemoryLine[]> =>
		(await readFile(memoryFile, "utf8").catch(() => ""))
			.split("\n")
			.slice(0, -1)
			.filter((l) => l !== "")
			.map((l) => JSON.parse(l) as MemoryLine);
	const rssTimeline: PhaseResult["rssTimeline"] = [];
	const mark = (phase: string) =>
		rssTimeline.push({ phase, rssMiB: statusMiB(pid, "VmRSS"), hwmMiB: statusMiB(pid, "VmHWM") });
	try {
		mark("started");
		const first = await nextCycle();
		mark("converged");
		say(
			`first cycle ${(Number(first.durationMs) / 1000).toFixed(2)} s, ${first.writes} writes, RSS ${statusMiB(pid, "VmRSS").toFixed(0)} MiB`,
		);
		const noop: PhaseResult["noop"] = [];
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
			say(
				`no-op cycle ${i + 1}: ${noop.at(-1)!.s.toFixed(2)} s, ${line.writes} writes, RSS ${noop.at(-1)!.rssMiB.toFixed(0)} MiB`,
			);
		}
		mark("no-op cycles");

		// The renewal: right after a cycle ends (the daemon then waits ≥ 1 s), so it is not folded into one in flight.
		const renewed = await issueTestLeaf(await benchCa(), { names: [f.certs[0]!.sni] });
		// Written beside the source (same file system), so the source's watch sees only the rename.
		const temp = join(f.scratch, `${f.certs[0]!.name}.pem.new`);
		await writeFile(temp, renewed.combinedPem, { mode: 0o600 });
		await nextCycle();
		const cpuRenew0 = cpuSeconds(pid);
		await rename(temp, join(f.source, `${f.certs[0]!.name}.pem`));
		const landed = performance.now();
		const probed = await servedByAll(f.nodes, f.certs[0]!.sni, renewed.serial);
		const servedS = (probed.lastAt - landed) / 1000;
		let renewalLine = await nextCycle();
		for (let i = 0; Number(renewalLine.writes) === 0 && i < 5; i++) renewalLine = await nextCycle();
		const renewCpuS = cpuSeconds(pid) - cpuRenew0;
		mark("renewal");
		const peakMiB = statusMiB(pid, "VmHWM");
		say(
			`renewal served by all ${f.nodes.length} in ${servedS.toFixed(2)} s (cycle ${(Number(renewalLine.durationMs) / 1000).toFixed(2)} s, ${renewalLine.writes} writes)`,
		);

		// The heap over more cycles: a full collection after each, between cycles.
		const heap: HeapLine[] = [];
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
				...(m.where ? { where: whereLine(m.after.rss, m.where) } : {}),
			});
		}
		mark("heap cycles");
		const cpuTotalS = cpuSeconds(pid);
		d.signal("SIGTERM");
		await d.exited;
		const result: PhaseResult = {
			variant: v,
			firstS: Number(first.durationMs) / 1000,
			firstWrites: Number(first.writes),
			noop,
			peakMiB,
			rssTimeline,
			servedS,
			probes: probed.probes,
			renewalS: Number(renewalLine.durationMs) / 1000,
			renewalWrites: Number(renewalLine.writes),
			renewCpuS,
			heap,
			cpuTotalS,
		};
		if (cpuProfDir) {
			result.profile = join(cpuProfDir, "summary.md");
			await writeFile(
				result.profile,
				selfTimeMarkdown(
					busiestProfile(cpuProfDir, pid),
					`certificatee run [${v.label}], fleet-socket ${f.nodes.length} × ${o.certs}: self time over the whole run (node --cpu-prof)`,
					30,
				),
			);
		}
		if (heapSnapshotDir) {
			result.heapSummary = join(heapSnapshotDir, "heap-summary.md");
			const snaps = (await memoryLines()).flatMap((m) => (m.snapshot ? [m.snapshot] : []));
			await writeFile(
				result.heapSummary,
				snaps
					.map((file, i) =>
						heapMarkdown(
							summariseHeap(file),
							`certificatee run [${v.label}], fleet-socket ${f.nodes.length} × ${o.certs}: heap after heap cycle ${i === 0 ? 1 : o.heapCycles} (after a full collection)`,
						),
					)
					.join("\n"),
			);
		}
		return result;
	} finally {
		await d.stop();
	}
}

/** The rows of one variant; `tag` names the variant in each metric when the run has more than one. */
function phaseRows(o: SocketFleetOptions, p: PhaseResult, loopS: number, tag: string): Row[] {
	const label = `${o.nodes} HAProxy × ${o.certs}`;
	const noopS = median(p.noop.map((c) => c.s));
	const h0 = p.heap[Math.min(4, p.heap.length - 1)];
	const hLast = p.heap.at(-1);
	return [
		{
			metric: `no-op cycle, ${label} (s), median of ${p.noop.length}${tag}`,
			variant: `certificatee run, ${o.nodes} haproxy-runtime targets`,
			certificatee: noopS,
			baselineName: `goal (issue 24): < ${SOCKET_FLEET_GOALS.cycleS} s`,
			baseline: SOCKET_FLEET_GOALS.cycleS,
			ratio: ratio(SOCKET_FLEET_GOALS.cycleS, noopS),
			note: `max ${Math.max(...p.noop.map((c) => c.s)).toFixed(2)} s; CPU ${median(p.noop.map((c) => c.cpuS))?.toFixed(2)} s per cycle (cycle + the wait)`,
		},
		{
			metric: `writes in ${p.noop.length} no-op cycles${tag}`,
			variant: "the daemon's cycle lines",
			certificatee: p.noop.reduce((n, c) => n + c.writes, 0),
			baselineName: "goal: 0",
			baseline: 0,
		},
		{
			metric: `daemon peak RSS (MiB), start to renewal served${tag}`,
			variant: "VmHWM of certificatee run",
			certificatee: p.peakMiB,
			baselineName: `goal (issue 24): < ${SOCKET_FLEET_GOALS.rssMiB} MiB`,
			baseline: SOCKET_FLEET_GOALS.rssMiB,
			ratio: ratio(SOCKET_FLEET_GOALS.rssMiB, p.peakMiB),
			note: p.rssTimeline.map((r) => `${r.phase} ${r.rssMiB.toFixed(0)}/${r.hwmMiB.toFixed(0)}`).join(", "),
		},
		{
			metric: `1 renewed file → served by all ${o.nodes} nodes (s)${tag}`,
			variant: "from the rename into the source to the last node's TLS probe",
			certificatee: p.servedS,
			baselineName: "bare socket loop, same run (durable write + set/commit, all nodes at once)",
			baseline: loopS,
			ratio: ratio(loopS, p.servedS),
			note: `goal < ${SOCKET_FLEET_GOALS.servedS} s and ≤ ${SOCKET_FLEET_GOALS.servedOverLoop}× the loop (ratio ≥ ${(1 / SOCKET_FLEET_GOALS.servedOverLoop).toFixed(1)}); the renewal cycle ${p.renewalS.toFixed(2)} s, ${p.renewalWrites} writes`,
		},
		{
			metric: `heap after GC, cycle ${Math.min(5, p.heap.length)} → ${p.heap.length} after the renewal (MiB)${tag}`,
			variant: "heapUsed after a full collection",
			certificatee: hLast && h0 ? hLast.heapMiB - h0.heapMiB : undefined,
			baselineName: "goal: flat",
			note: p.heap.map((h) => h.heapMiB.toFixed(1)).join(" / "),
		},
	];
}

function phaseNotes(o: SocketFleetOptions, p: PhaseResult, tag: string): string[] {
	const heap = p.heap;
	return [
		`${tag}Daemon: node ${process.version}${p.variant.label === "default" ? "" : `, ${p.variant.label}`}. First convergence ${p.firstS.toFixed(2)} s, ${p.firstWrites} writes.`,
		`${tag}No-op cycles: ${p.noop.map((c) => c.s.toFixed(2)).join(" / ")} s; CPU per cycle and wait ${p.noop.map((c) => c.cpuS.toFixed(2)).join(" / ")} s; RSS at each end ${p.noop.map((c) => c.rssMiB.toFixed(0)).join(" / ")} MiB.`,
		`${tag}Renewal: one new leaf renamed into the source right after a cycle ended; served by all ${o.nodes} nodes ${p.servedS.toFixed(3)} s after the rename (${p.probes} probes); the daemon's CPU from the rename to the end of the renewal cycle ${p.renewCpuS.toFixed(2)} s.`,
		`${tag}Heap cycles (a full collection after each): heapUsed ${heap.map((h) => h.heapMiB.toFixed(1)).join(" / ")} MiB (V8 heap committed ${heap.map((h) => h.heapTotalMiB.toFixed(0)).join(" / ")} MiB); RSS after it ${heap.map((h) => h.rssMiB.toFixed(0)).join(" / ")} MiB; external + array buffers ${heap.map((h) => h.externalMiB.toFixed(1)).join(" / ")} MiB; cycles ${heap.map((h) => h.s.toFixed(2)).join(" / ")} s, writes ${heap.reduce((n, h) => n + h.writes, 0)}. The daemon's total CPU ${p.cpuTotalS.toFixed(1)} s.`,
		...(heap.at(-1)?.where
			? [`${tag}Where the RSS is after the last heap cycle's collection: ${heap.at(-1)?.where}.`]
			: []),
		`${tag}RSS timeline (VmRSS/VmHWM MiB at each phase's end): ${p.rssTimeline.map((r) => `${r.phase} ${r.rssMiB.toFixed(0)}/${r.hwmMiB.toFixed(0)}`).join(", ")}`,
		...(p.profile ? [`${tag}Daemon CPU profile summary: ${p.profile}`] : []),
		...(p.heapSummary ? [`${tag}Heap snapshots summed up in ${p.heapSummary}.`] : []),
	];
}

export async function socketFleet(o: SocketFleetOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	await ensureBuilt();
	const scratch = await mkdtemp(join(tmpdir(), "certificatee-bench-fleet-socket-"));
	const variants = o.variants ?? parseVariants(undefined);
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
		for (const [file, pem] of Object.entries(files))
			await writeFile(join(source, file), pem, { mode: 0o600 });
		const fleet: Fleet = { nodes, certs, source, scratch };

		// The variants one after the other against the same nodes: each starts where the last renewal left them.
		const phases: PhaseResult[] = [];
		for (const [i, v] of variants.entries()) phases.push(await daemonPhase(o, fleet, v, i));

		// The baseline, with the daemons gone: another renewal of the same name, pushed by hand.
		const again = await issueTestLeaf(await benchCa(), { names: [certs[0]!.sni] });
		const loop = await bareLoop(
			nodes,
			`${certs[0]!.name}.pem`,
			again.combinedPem,
			certs[0]!.sni,
			again.serial,
		);

		const many = phases.length > 1;
		const rows = phases.flatMap((p) => phaseRows(o, p, loop.servedS, many ? ` [${p.variant.label}]` : ""));
		const notes = [
			`${o.nodes} real HAProxy ${nodes[0]?.bin} processes (master-worker), each with its own crt directory of the same ${o.certs} ECDSA P-256 certificates (one shared key, cached in bench/.cache/: ${certsS.toFixed(1)} s to read or make), started 2 at a time in ${haproxyStartS.toFixed(0)} s; their RSS ${haproxyRssMiB.toFixed(0)} MiB (masters + workers).`,
			`Each daemon variant is one certificatee run (dist/cli/main.js): a directory source of the ${o.certs} files (debounce 100 ms), ${o.nodes} haproxy-runtime targets (admin socket and crt_dir; no probe: with one, every cycle would handshake every name on every node), interval 1 s, its own state directory; the variants run one after the other against the same nodes${many ? ` (${phases.map((p) => p.variant.label).join(", ")})` : ""}.`,
			...phases.flatMap((p) => phaseNotes(o, p, many ? `[${p.variant.label}] ` : "")),
			`Bare loop (after the daemons stopped): pushed in ${loop.pushedS.toFixed(3)} s, served by all in ${loop.servedS.toFixed(3)} s (${loop.probes} probes).`,
			"This process's probes (8 at a time, rounds 20 ms apart) share the 2 cores with the daemon and the HAProxy workers; both the daemon and the loop are timed by the same probes in the same run.",
		];
		return {
			scenario: "fleet-socket",
			title: "Fleet through the socket: real HAProxy × certificates, one daemon",
			parameters: {
				nodes: o.nodes,
				certs: o.certs,
				noop_cycles: o.noopCycles,
				heap_cycles: o.heapCycles,
				key: "ECDSA P-256 (one shared key)",
				variants: variants.map((v) => v.label).join("; "),
			},
			rows,
			notes,
			durationS: seconds(t0),
		};
	} finally {
		await Promise.all(nodes.map((h) => h.stop()));
		await rm(scratch, { recursive: true, force: true });
	}
}
