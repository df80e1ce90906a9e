/** Process figures from /proc: resident memory of a process tree, sampled; percentiles. */
import { readdirSync, readFileSync } from "node:fs";

function rssKiB(pid: number): number {
	try {
		const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
		return m ? Number(m[1]) : 0;
	} catch {
		return 0;
	}
}

function parentOf(pid: number): number | undefined {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ")".
		return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
	} catch {
		return undefined;
	}
}

/** `pid` and its direct children (HAProxy's master and its workers, old ones included). */
export function familyRssMiB(pid: number): number {
	let kib = rssKiB(pid);
	for (const entry of readdirSync("/proc")) {
		if (!/^\d+$/.test(entry)) continue;
		const child = Number(entry);
		if (child !== pid && parentOf(child) === pid) kib += rssKiB(child);
	}
	return kib / 1024;
}

/** Peak of familyRssMiB(pid) sampled every `everyMs` until stop(). */
export function sampleRss(pid: number, everyMs = 20): { stop(): number } {
	let peak = familyRssMiB(pid);
	const timer = setInterval(() => {
		peak = Math.max(peak, familyRssMiB(pid));
	}, everyMs);
	return {
		stop() {
			clearInterval(timer);
			return Math.max(peak, familyRssMiB(pid));
		},
	};
}

/** The p-th percentile (0-100) of numbers, nearest rank; undefined when empty. */
export function percentile(values: readonly number[], p: number): number | undefined {
	if (values.length === 0) return undefined;
	const sorted = [...values].sort((a, b) => a - b);
	const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
	return sorted[rank];
}

export function median(values: readonly number[]): number | undefined {
	return percentile(values, 50);
}

export const seconds = (startMs: number) => (performance.now() - startMs) / 1000;

/** User + system CPU seconds used so far by process `pid` (from /proc/<pid>/stat; clock ticks of 100 Hz). */
export function cpuSeconds(pid: number): number {
	const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
	const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
	// After "(comm) ": state is field 0, utime 11, stime 12.
	return (Number(fields[11]) + Number(fields[12])) / 100;
}
