/**
 * Scenario 4, atomic directory sync. Swaps per second of a 3-file set (tls.crt, tls.key, ca.crt) with
 * certificatee's exchange layout (renameat2 RENAME_EXCHANGE) and symlink layout (..data), against writing the
 * same three files one by one with temp + rename each (what most tools do), with fsync everywhere; and, from
 * the same runs, how often reader processes see a mixed set: a naive reader opening each path alone, and a
 * reader that uses the layout (one directory handle for exchange, ..data resolved once for symlink).
 * Then SIGKILL rounds: a writer killed at a random moment never leaves a mixed or torn set.
 * The reader and writer children are the atomicdir tests' own (test/atomicdir/children).
 */
import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { removeStaleStaging, syncDirectory, writeFileAtomic } from "../../src/atomicdir/index.js";
import { SET_NAMES, versionedFiles } from "../../test/atomicdir/children/versioned.js";
import { heldVersion, type ReaderStats, stagingLeftovers, startChild } from "../../test/atomicdir/helpers.js";
import { seconds } from "../lib/proc.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";

export interface AtomicdirOptions {
	swaps: number;
	kills: number;
	/** Parent directory of the targets (default: the OS temp dir). */
	dir?: string;
}

type Layout = "exchange" | "symlink" | "per-file";

interface LayoutRun {
	layout: Layout;
	swapsPerS: number;
	naive: ReaderStats;
	aware: ReaderStats;
}

async function publish(layout: Layout, target: string, version: number): Promise<void> {
	const files = versionedFiles(version);
	if (layout === "per-file") {
		for (const name of SET_NAMES) {
			const r = await writeFileAtomic(join(target, name), files[name]!, { durable: true });
			if (r.problems.length > 0) throw r.problems[0];
		}
		return;
	}
	const r = await syncDirectory(target, files, { swap: layout, durable: true });
	if (r.problems.length > 0) throw r.problems[0];
}

async function swapRun(layout: Layout, base: string, swaps: number): Promise<LayoutRun> {
	const target = join(base, `swap-${layout}`);
	const stop = join(base, `stop-${layout}`);
	if (layout === "per-file") {
		await syncDirectory(target, versionedFiles(0), { swap: "exchange" }); // just the directory and v0 files
	} else await publish(layout, target, 0);
	const awareTier = layout === "symlink" ? "symlink" : "dirfd";
	const readers = await Promise.all(["naive", awareTier].map((t) => startChild("reader", [target, t, stop])));
	const started = performance.now();
	for (let v = 1; v <= swaps; v++) await publish(layout, target, v);
	const s = seconds(started);
	writeFileSync(stop, "");
	const stats = await Promise.all(
		readers.map(async (r) => {
			const exit = await r.exited;
			const line = r.lines.at(-1);
			if (!line?.startsWith("{")) throw new Error(`reader failed: ${exit.stderr}`);
			return JSON.parse(line) as ReaderStats;
		}),
	);
	if (heldVersion(target) !== swaps) throw new Error(`${layout}: target does not hold version ${swaps}`);
	return { layout, swapsPerS: swaps / s, naive: stats[0]!, aware: stats[1]! };
}

async function kills(base: string, rounds: number, swap: "exchange" | "symlink"): Promise<string> {
	const target = join(base, `kill-${swap}`);
	await syncDirectory(target, versionedFiles(1), { swap });
	let held = 1;
	let left = 0;
	let inconsistent = 0;
	for (let round = 0; round < rounds; round++) {
		const writer = await startChild("writer", [target, swap, String(held + 1), "0", "1"]);
		await writer.waitFor((l) => l.startsWith("acked "));
		await new Promise((r) => setTimeout(r, Math.random() * 20));
		writer.kill("SIGKILL");
		await writer.exited;
		const acked = Math.max(
			held,
			...writer.lines.filter((l) => l.startsWith("acked ")).map((l) => Number(l.slice(6))),
		);
		if (stagingLeftovers(base).length > 0) left += 1;
		try {
			const now = heldVersion(target);
			if (now !== acked && now !== acked + 1) throw new Error(`version ${now}, acked ${acked}`);
			held = now;
		} catch {
			inconsistent += 1;
		}
		await removeStaleStaging(target);
		if (stagingLeftovers(base).length > 0) inconsistent += 1;
	}
	return `${swap}: ${rounds} writers SIGKILLed mid-loop, ${inconsistent} left a mixed/torn/unacked set, ${left} left staging (removed by the next start), reached version ${held}`;
}

const pct = (s: ReaderStats) => (100 * (s.mismatches + s.torn)) / Math.max(1, s.reads);

export async function atomicdir(o: AtomicdirOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	const base = await mkdtemp(join(o.dir ?? tmpdir(), "certificatee-bench-atomicdir-"));
	try {
		const runs: Record<Layout, LayoutRun> = {
			exchange: await swapRun("exchange", base, o.swaps),
			symlink: await swapRun("symlink", base, o.swaps),
			"per-file": await swapRun("per-file", base, o.swaps),
		};
		const pf = runs["per-file"];
		const rows: Row[] = [];
		for (const layout of ["exchange", "symlink"] as const) {
			const r = runs[layout];
			const b = { variant: `${layout} layout`, baselineName: "3 files, temp+rename each" };
			rows.push(
				{
					...b,
					metric: "swaps/s (3-file set, fsync)",
					certificatee: r.swapsPerS,
					baseline: pf.swapsPerS,
					ratio: ratio(r.swapsPerS, pf.swapsPerS),
					note: "certificatee / baseline",
				},
				{
					...b,
					metric: "naive per-path reader: mixed or torn sets (%)",
					certificatee: pct(r.naive),
					baseline: pct(pf.naive),
					ratio: ratio(pct(pf.naive), pct(r.naive)),
				},
				{
					...b,
					metric: `layout-aware reader (${r.aware.tier}): mixed or torn sets (%)`,
					certificatee: pct(r.aware),
					baseline: pct(pf.aware),
					ratio: ratio(pct(pf.aware), pct(r.aware)),
					note: `baseline reader: ${pf.aware.tier}`,
				},
			);
		}
		const notes = Object.values(runs).map(
			(r) =>
				`${r.layout}: ${o.swaps} swaps at ${r.swapsPerS.toFixed(0)}/s; naive reader ${r.naive.reads} reads, ${r.naive.mismatches} mixed, ${r.naive.torn} torn; ` +
				`${r.aware.tier} reader ${r.aware.reads} reads, ${r.aware.mismatches} mixed, ${r.aware.torn} torn, ${r.aware.retries} retries`,
		);
		if (o.kills > 0) {
			notes.push(await kills(base, o.kills, "exchange"));
			notes.push(await kills(base, Math.ceil(o.kills / 3), "symlink"));
		}
		notes.push(
			`Targets under ${o.dir ?? tmpdir()}; writer in the bench process, each reader its own process (the atomicdir tests' reader child).`,
		);
		return {
			scenario: "atomicdir",
			title: "4. Atomic directory sync",
			parameters: { swaps: o.swaps, files: SET_NAMES.join("+"), durable: true, kill_rounds: o.kills },
			rows,
			notes,
			durationS: seconds(t0),
		};
	} finally {
		await rm(base, { recursive: true, force: true });
	}
}
