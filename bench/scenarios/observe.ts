/**
 * Scenario 2, observation cost. One HAProxy with N refs: certificatee's observe() through the pipelined
 * runtime socket (the haproxy-runtime driver) and through the Data Plane API stand-in (bench/lib/dpapi-standin.ts:
 * the double's handlers without validation, reads from memory), against one connection per command (what a
 * shell loop over `socat` does). A no-op sync cycle (all N already in place): writes (must be 0) and wall time,
 * against an unconditional reload. (The fleet is its own scenario: fleet.ts.)
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDataplaneEndpoint } from "../../src/targets/haproxy-dataplane/index.js";
import {
	dataplaneEndpointSchema,
	dataplaneTargetSchema,
} from "../../src/targets/haproxy-dataplane/schema.js";
import { createRuntimeEndpoint } from "../../src/targets/haproxy-runtime/index.js";
import { runtimeTargetSchema } from "../../src/targets/haproxy-runtime/schema.js";
import { buildTarget } from "../../src/targets/registry.js";
import { type Haproxy, socketCommand, startHaproxy } from "../../test/harness/haproxy.js";
import { type Standins, spawnStandins } from "../lib/dpapi-standin.js";
import { crtDirFiles, desiredOf, makeCerts } from "../lib/pool.js";
import { median, seconds } from "../lib/proc.js";
import { masterReady, reloadToNewWorker } from "../lib/reload.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";

export interface ObserveOptions {
	/** Ref counts for the single endpoint, e.g. [1000] or [1000, 5000]. */
	sizes: number[];
	reps: number;
}

const WRITE_OPS = /^(create|replace|delete|add)/;
const never = () => new AbortController().signal;

async function timed<T>(fn: () => Promise<T>): Promise<{ s: number; value: T }> {
	const started = performance.now();
	const value = await fn();
	return { s: seconds(started), value };
}

async function medianOf(reps: number, fn: () => Promise<unknown>): Promise<number> {
	const times: number[] = [];
	for (let i = 0; i < reps; i++) times.push((await timed(fn)).s);
	return median(times)!;
}

/** The same facts the driver reads from HAProxy, one connection per command. */
async function perConnection(h: Haproxy): Promise<number> {
	const list = await socketCommand(h.adminSocket, "show ssl cert");
	const names = list
		.split("\n")
		.filter((l) => l.startsWith("/") && l.startsWith(h.crtDir))
		.map((l) => l.trim());
	for (const n of names) await socketCommand(h.adminSocket, `show ssl cert ${n}`);
	const lists = (await socketCommand(h.adminSocket, "show ssl crt-list"))
		.split("\n")
		.filter((l) => l.startsWith("/"));
	for (const l of lists) await socketCommand(h.adminSocket, `show ssl crt-list ${l.trim()}`);
	return names.length;
}

async function single(n: number, reps: number, rows: Row[], notes: string[]): Promise<void> {
	const certs = await makeCerts(n);
	const h = await startHaproxy({ crtDir: crtDirFiles(certs) });
	let standin: Standins | undefined;
	const scratch = await mkdtemp(join(tmpdir(), "certificatee-bench-observe-"));
	const closers: Array<() => Promise<void>> = [];
	try {
		const runtimeConfig = runtimeTargetSchema.parse({
			name: "lb",
			type: "haproxy-runtime",
			socket: h.adminSocket,
			crt_dir: h.crtDir,
		});
		const driver = createRuntimeEndpoint(runtimeConfig, { now: () => new Date() });
		closers.push(() => driver.close());
		const cold = await timed(() => driver.observe(never()));
		if (!cold.value.ok) throw new Error(`runtime observe failed: ${cold.value.error.message}`);
		const refs = cold.value.refs.length;
		const runtimeS = await medianOf(reps, () => driver.observe(never()));
		const perConnS = await medianOf(reps, () => perConnection(h));

		// The Data Plane API stand-in (the double's handlers, reads from memory): the figure is certificatee's own.
		standin = await spawnStandins([{ adminSocket: h.adminSocket, haproxyDir: h.dir, storageDir: h.crtDir }], {
			processes: 1,
			username: "admin",
			password: "standin-password",
			scratch,
		});
		const endpointRaw = {
			name: "lb",
			url: standin.urls[0]!,
			username: "admin",
			password: "standin-password",
		};
		const endpointConfig = dataplaneEndpointSchema.parse(endpointRaw);
		const api = createDataplaneEndpoint(endpointConfig, { now: () => new Date() });
		closers.push(() => api.close());
		const apiObs = await api.observe(never());
		if (!apiObs.ok) throw new Error(`dataplane observe failed: ${apiObs.error.message}`);
		const apiS = await medianOf(reps, () => api.observe(never()));

		const base = { baselineName: "one connection per command" };
		rows.push(
			{
				...base,
				metric: `observe ${refs} refs (s)`,
				variant: "runtime driver (pipelined, 1 connection)",
				certificatee: runtimeS,
				baseline: perConnS,
			},
			{
				...base,
				metric: `observe ${refs} refs (refs/s)`,
				variant: "runtime driver (pipelined, 1 connection)",
				certificatee: refs / runtimeS,
				baseline: refs / perConnS,
				note: "certificatee / baseline",
			},
			{
				...base,
				metric: `observe ${refs} refs (s)`,
				variant: "dataplane driver via API stand-in",
				certificatee: apiS,
				baseline: perConnS,
			},
		);
		notes.push(
			`N=${n}: first (cold) runtime observe ${cold.s.toFixed(2)} s (reads and parses every file in crt_dir once; later ` +
				`observes reuse unchanged files); the baseline only asks HAProxy (no file reads). Medians of ${reps}.`,
		);

		// No-op cycle: every certificate already in place.
		const desired = desiredOf(certs);
		const runtimeTarget = buildTarget(runtimeConfig, { now: () => new Date() });
		closers.push(() => runtimeTarget.close());
		const apiTarget = buildTarget(
			dataplaneTargetSchema.parse({
				name: "fleet",
				type: "haproxy-dataplane",
				storage_dir: h.crtDir,
				endpoints: [endpointRaw],
			}),
			{ now: () => new Date() },
		);
		closers.push(() => apiTarget.close());
		const noop = async (t: typeof runtimeTarget) => {
			const r = await t.run(desired, "sync", never());
			const e = r.endpoints[0]!;
			if (!e.ok) throw new Error(`no-op cycle failed: ${e.error?.message}`);
			return e.steps.length;
		};
		await noop(runtimeTarget);
		let runtimeSteps = 0;
		const runtimeNoopS = await medianOf(reps, async () => {
			runtimeSteps += await noop(runtimeTarget);
		});
		const writesBefore = apiWrites(await standin.counts());
		await noop(apiTarget);
		const apiNoopS = await medianOf(reps, () => noop(apiTarget));
		const apiWriteCount = apiWrites(await standin.counts()) - writesBefore;
		const pid = await h.workerPid();
		const reloadTimes: number[] = [];
		for (let i = 0; i < reps; i++) {
			await masterReady(h);
			reloadTimes.push((await timed(() => reloadToNewWorker(h))).s);
		}
		const reloadS = median(reloadTimes)!;
		if ((await h.workerPid()) === pid) throw new Error("reload did not happen");
		const nb = { baselineName: "unconditional reload (SIGUSR2)" };
		rows.push(
			{
				...nb,
				metric: `no-op cycle, ${n} certs: wall (s)`,
				variant: "haproxy-runtime target",
				certificatee: runtimeNoopS,
				baseline: reloadS,
			},
			{
				...nb,
				metric: `no-op cycle, ${n} certs: writes`,
				variant: "haproxy-runtime target (planned steps)",
				certificatee: runtimeSteps,
				baseline: n,
				note: "baseline reloads all N",
			},
			{
				...nb,
				metric: `no-op cycle, ${n} certs: wall (s)`,
				variant: "dataplane target via API stand-in",
				certificatee: apiNoopS,
				baseline: reloadS,
			},
			{
				...nb,
				metric: `no-op cycle, ${n} certs: write requests`,
				variant: "dataplane target (counted by the stand-in)",
				certificatee: apiWriteCount,
				baseline: n,
				note: "baseline reloads all N",
			},
		);
	} finally {
		for (const c of closers.reverse()) await c().catch(() => undefined);
		await standin?.close();
		await rm(scratch, { recursive: true, force: true });
		await h.stop();
	}
}

function apiWrites(counts: Record<string, number>): number {
	return Object.entries(counts)
		.filter(([op]) => WRITE_OPS.test(op))
		.reduce((n, [, c]) => n + c, 0);
}

export async function observe(o: ObserveOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	const rows: Row[] = [];
	const notes: string[] = [];
	for (const n of o.sizes) await single(n, o.reps, rows, notes);
	for (const r of rows)
		if (r.ratio === undefined && r.baseline !== undefined) r.ratio = ratio(r.baseline, r.certificatee);
	for (const r of rows) if (r.note === "certificatee / baseline") r.ratio = ratio(r.certificatee, r.baseline);
	return {
		scenario: "observe",
		title: "2. Observation cost",
		parameters: {
			N_refs: o.sizes.join("+"),
			reps: o.reps,
		},
		rows,
		notes,
		durationS: seconds(t0),
	};
}
