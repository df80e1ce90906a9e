/**
 * The certificatee side of the fleet measurement, alone in its own process so its CPU and memory are its
 * own: one haproxy-dataplane target over every endpoint, `cycles` sync cycles with every certificate already
 * in place, then (when the job names a renewed file and stdin says "renew") one sync cycle that rolls it.
 * argv: a JSON file (Job). Run with --expose-gc: the heap is also measured after a collection per cycle.
 * stdout: NDJSON, one line per event ({"loaded"}, {"cycle"} per cycle, {"noopDone"}, {"renewStart"},
 * {"renewDone"}, {"done"}), so the parent reads each as it comes and nothing grows with the run.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { getHeapStatistics } from "node:v8";
import { parseBundle } from "../../src/certificates/index.js";
import { runCycle } from "../../src/reconcile/cycle.js";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import type { CycleReport } from "../../src/reconcile/report.js";
import { dataplaneTargetSchema } from "../../src/targets/haproxy-dataplane/schema.js";
import { buildTarget } from "../../src/targets/registry.js";
import { type MemoryWhere, memoryWhere } from "../lib/memory-where.js";

export interface FleetJob {
	endpoints: Array<{
		name: string;
		url: string;
		username: string;
		password: string;
		master_runtime?: boolean;
	}>;
	storageDir: string;
	certDir: string;
	cycles: number;
	/** bench/lib/memory-probe.cjs: where the RSS is, measured after the last no-op cycle's collection. */
	memoryProbe?: string;
	/** A renewed combined PEM for one certificate, rolled after the no-op cycles when stdin says "renew". */
	renewed?: { name: string; file: string };
}

export interface CycleLine {
	cycle: number;
	wallS: number;
	cpuS: number;
	/** RSS at the end of the cycle; heap used after a full collection (when gc is exposed). */
	rssMiB: number;
	heapMiB?: number;
	/** Largest V8 heap (total, used) and external memory seen during the cycle, sampled every 250 ms. */
	heapTotalPeakMiB: number;
	heapUsedPeakMiB: number;
	externalPeakMiB: number;
	steps: number;
	failedEndpoints: number;
	refs: number;
	errors: string[];
	/** Where the RSS is after the collection (the last no-op cycle only). */
	where?: MemoryWhere;
}

const MiB = 2 ** 20;
const line = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const gc = (globalThis as { gc?: () => void }).gc;

const job = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as FleetJob;
const rssBefore = process.memoryUsage().rss;
const desired: DesiredCertificate[] = readdirSync(job.certDir)
	.filter((f) => f.endsWith(".pem"))
	.map((f) => {
		const name = f.replace(/\.pem$/, "");
		const bundle = parseBundle({ combined: readFileSync(join(job.certDir, f), "utf8") }, { source: name });
		return { name, names: [`${name}.bench.test`], bundle, origin: "bench" };
	});
const target = buildTarget(
	dataplaneTargetSchema.parse({
		name: "fleet",
		type: "haproxy-dataplane",
		storage_dir: job.storageDir,
		endpoints: job.endpoints,
	}),
	{ now: () => new Date() },
);
// Sparse sampling (the peak itself is VmHWM, read at the end): sampling every 20 ms cost the measured
// process ~3 % of its CPU in the 100 × 1000 profile.
let peak = process.memoryUsage.rss();
const sampler = setInterval(() => {
	peak = Math.max(peak, process.memoryUsage.rss());
}, 250);
line({ loaded: true, rssBeforeMiB: rssBefore / MiB, rssLoadedMiB: process.memoryUsage().rss / MiB });

let heapPeak = { total: 0, used: 0, external: 0 };
const heapSampler = setInterval(() => {
	const h = getHeapStatistics();
	heapPeak = {
		total: Math.max(heapPeak.total, h.total_heap_size),
		used: Math.max(heapPeak.used, h.used_heap_size),
		external: Math.max(heapPeak.external, h.external_memory),
	};
}, 250);

// Diagnosis (FLEET_LIVE_PROBE=1): the live heap mid-cycle, by a full collection every second.
let liveMax = 0;
const liveProbe =
	process.env.FLEET_LIVE_PROBE && gc
		? setInterval(() => {
				gc();
				liveMax = Math.max(liveMax, process.memoryUsage().heapUsed);
			}, 1000)
		: undefined;

async function cycle(): Promise<{ report: CycleReport; wallS: number; cpuS: number }> {
	heapPeak = { total: 0, used: 0, external: 0 };
	const started = performance.now();
	const cpu0 = process.cpuUsage();
	const report = await runCycle(
		{
			loadDesired: async () => ({ certificates: desired, problems: [] }),
			targets: [target],
			now: () => new Date(),
		},
		"sync",
		new AbortController().signal,
	);
	const cpu = process.cpuUsage(cpu0);
	return { report, wallS: (performance.now() - started) / 1000, cpuS: (cpu.user + cpu.system) / 1e6 };
}

const errorsOf = (report: CycleReport) => {
	const errors = new Set<string>();
	for (const e of report.targets.flatMap((t) => t.endpoints))
		if (!e.ok && e.error) errors.add(`${e.error.code}: ${e.error.message.replace(/lb\d+/g, "lbN")}`);
	return [...errors].slice(0, 5);
};

for (let i = 0; i < job.cycles; i++) {
	const { report, wallS, cpuS } = await cycle();
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	const out: CycleLine = {
		cycle: i + 1,
		wallS,
		cpuS,
		rssMiB: 0,
		heapTotalPeakMiB: heapPeak.total / MiB,
		heapUsedPeakMiB: heapPeak.used / MiB,
		externalPeakMiB: heapPeak.external / MiB,
		steps: endpoints.reduce((n, e) => n + e.steps.length, 0),
		failedEndpoints: endpoints.filter((e) => !e.ok).length,
		refs: endpoints.reduce((n, e) => n + e.refs.length, 0),
		errors: errorsOf(report),
	};
	if (gc) {
		gc();
		out.heapMiB = process.memoryUsage().heapUsed / MiB;
	}
	out.rssMiB = process.memoryUsage().rss / MiB;
	if (job.memoryProbe && i === job.cycles - 1) out.where = memoryWhere(job.memoryProbe);
	line(out);
}
line({ noopDone: true });

if (job.renewed) {
	const lines = createInterface({ input: process.stdin });
	for await (const text of lines) if (text.trim() === "renew") break;
	const { name, file } = job.renewed;
	const at = desired.findIndex((d) => d.name === name);
	if (at < 0) throw new Error(`renewed ${name} is not a desired certificate`);
	const old = desired[at]!;
	desired[at] = { ...old, bundle: parseBundle({ combined: readFileSync(file, "utf8") }, { source: name }) };
	line({ renewStart: true, at: Date.now() });
	const { report, wallS, cpuS } = await cycle();
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	const steps = endpoints.flatMap((e) => e.steps);
	line({
		renewDone: true,
		at: Date.now(),
		wallS,
		cpuS,
		steps: steps.length,
		stepsOk: steps.filter((s) => s.result === "ok").length,
		failedEndpoints: endpoints.filter((e) => !e.ok).length,
		errors: errorsOf(report),
	});
}
clearInterval(sampler);
clearInterval(heapSampler);
if (liveProbe) {
	clearInterval(liveProbe);
	process.stderr.write(`live heap max mid-cycle: ${(liveMax / MiB).toFixed(0)} MiB\n`);
}
await target.close();
const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"));
const cpu = process.cpuUsage();
line({
	done: true,
	rssPeakMiB: Math.max(peak, Number(hwm?.[1] ?? 0) * 1024) / MiB,
	cpuTotalS: (cpu.user + cpu.system) / 1e6,
	desired: desired.length,
});
process.stdout.end(() => process.exit(0));
