/** Top self-time functions of a V8 .cpuprofile (node --cpu-prof), as Markdown table lines. */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

interface ProfileNode {
	id: number;
	callFrame: { functionName: string; url: string; lineNumber: number };
	hitCount?: number;
}

export interface SelfTime {
	fn: string;
	where: string;
	ms: number;
	share: number;
}

/**
 * Self time per function (summed over its nodes), largest first. `afterIdleGapMs`: only the samples after the
 * last run of "(idle)" samples lasting that long (a daemon's work after a quiet spell, not its start).
 */
export function selfTimes(
	file: string,
	top = 25,
	options: { afterIdleGapMs?: number } = {},
): { totalMs: number; rows: SelfTime[] } {
	const profile = JSON.parse(readFileSync(file, "utf8")) as {
		nodes: ProfileNode[];
		samples: number[];
		timeDeltas: number[];
		startTime: number;
		endTime: number;
	};
	const byId = new Map(profile.nodes.map((n) => [n.id, n]));
	const from =
		options.afterIdleGapMs === undefined ? 0 : afterLastIdleGap(profile, byId, options.afterIdleGapMs);
	const msById = new Map<number, number>();
	profile.samples.forEach((id, i) => {
		if (i < from) return;
		msById.set(id, (msById.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
	});
	const total = [...msById.values()].reduce((a, b) => a + b, 0);
	const byFn = new Map<string, SelfTime>();
	for (const [id, ms] of msById) {
		const frame = byId.get(id)?.callFrame;
		if (!frame) continue;
		const url = frame.url.replace(/^file:\/\//, "").replace(/^.*\/(src|node_modules|bench|test)\//, "$1/");
		const fn = frame.functionName || "(anonymous)";
		const where = url ? `${url}:${frame.lineNumber + 1}` : "";
		const key = `${fn} ${where}`;
		const row = byFn.get(key) ?? { fn, where, ms: 0, share: 0 };
		row.ms += ms;
		byFn.set(key, row);
	}
	const rows = [...byFn.values()].sort((a, b) => b.ms - a.ms).slice(0, top);
	for (const r of rows) r.share = total > 0 ? r.ms / total : 0;
	return { totalMs: total, rows };
}

/** The index of the first sample after the last run of idle samples lasting `gapMs` or more (0: none). */
function afterLastIdleGap(
	profile: { samples: number[]; timeDeltas: number[] },
	byId: ReadonlyMap<number, ProfileNode>,
	gapMs: number,
): number {
	let start = 0;
	let idleMs = 0;
	profile.samples.forEach((id, i) => {
		if (byId.get(id)?.callFrame.functionName === "(idle)") {
			idleMs += (profile.timeDeltas[i] ?? 0) / 1000;
			return;
		}
		if (idleMs >= gapMs) start = i;
		idleMs = 0;
	});
	return start;
}

export function selfTimeMarkdown(
	file: string,
	title: string,
	top = 25,
	options: { afterIdleGapMs?: number } = {},
): string {
	const { totalMs, rows } = selfTimes(file, top, options);
	return [
		`### ${title}`,
		"",
		`Sampled ${(totalMs / 1000).toFixed(1)} s (idle included as "(idle)"); top ${rows.length} functions by self time.`,
		"",
		"| self ms | share | function | where |",
		"| ---: | ---: | --- | --- |",
		...rows.map((r) => `| ${r.ms.toFixed(0)} | ${(r.share * 100).toFixed(1)} % | ${r.fn} | ${r.where} |`),
		"",
	].join("\n");
}

/** The profile of process `pid` in `dir` (CPU.<date>.<pid>.<tid>.<seq>.cpuprofile) with the most busy samples. */
export function busiestProfile(dir: string, pid: number): string {
	const files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile") && f.includes(`.${pid}.`));
	const busy = (f: string) => {
		const { totalMs, rows } = selfTimes(join(dir, f), 1_000_000);
		return totalMs - (rows.find((r) => r.fn === "(idle)")?.ms ?? 0);
	};
	const best = files.map((f) => ({ f, ms: busy(f) })).sort((a, b) => b.ms - a.ms)[0];
	if (!best) throw new Error(`no CPU profile of process ${pid} in ${dir}`);
	return join(dir, best.f);
}
