/**
 * A V8 `.cpuprofile` (node --cpu-prof) summarised: self time per function over a window of the profile, the
 * busy stretch after the last idle gap of `idleGapMs` or more (in the served scenario: the cycles during the
 * wait, not the daemon's start and first convergence).
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
	id: number;
	callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
	nodes: ProfileNode[];
	samples: number[];
	timeDeltas: number[];
}

export interface SelfTime {
	fn: string;
	ms: number;
	share: number;
}

export interface ProfileSummary {
	/** Length of the window summarised, and the share of it the process was not idle. */
	windowMs: number;
	busyMs: number;
	top: SelfTime[];
}

const IDLE = "(idle)";

export function summariseProfile(
	path: string,
	options: { idleGapMs?: number; top?: number } = {},
): ProfileSummary {
	const profile = JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
	const idleGapUs = (options.idleGapMs ?? 1500) * 1000;
	const byId = new Map(profile.nodes.map((n) => [n.id, n]));
	const nameOf = (id: number): string => {
		const f = byId.get(id)?.callFrame;
		if (!f) return "?";
		const where = f.url
			? `${f.url.replace(/^file:\/\/.*?\/(dist|node_modules)\//, "$1/")}:${f.lineNumber + 1}`
			: "";
		return `${f.functionName || "(anonymous)"}${where ? ` ${where}` : ""}`;
	};
	// The window starts after the last run of idle samples lasting idleGapMs or more.
	let start = 0;
	let idleSince: number | undefined;
	let idleUs = 0;
	for (let i = 0; i < profile.samples.length; i++) {
		const idle = byId.get(profile.samples[i] as number)?.callFrame.functionName === IDLE;
		if (idle) {
			idleSince ??= i;
			idleUs += profile.timeDeltas[i] ?? 0;
		} else {
			if (idleSince !== undefined && idleUs >= idleGapUs) start = i;
			idleSince = undefined;
			idleUs = 0;
		}
	}
	const self = new Map<string, number>();
	let windowUs = 0;
	let busyUs = 0;
	for (let i = start; i < profile.samples.length; i++) {
		const dt = profile.timeDeltas[i + 1] ?? 0;
		const id = profile.samples[i] as number;
		windowUs += dt;
		if (byId.get(id)?.callFrame.functionName === IDLE) continue;
		busyUs += dt;
		const fn = nameOf(id);
		self.set(fn, (self.get(fn) ?? 0) + dt);
	}
	const top = [...self.entries()]
		.sort((a, b) => b[1] - a[1])
		.slice(0, options.top ?? 25)
		.map(([fn, us]) => ({ fn, ms: us / 1000, share: busyUs > 0 ? us / busyUs : 0 }));
	return { windowMs: windowUs / 1000, busyMs: busyUs / 1000, top };
}

/** The summary as a markdown table. */
export function profileTable(s: ProfileSummary): string {
	return [
		`Window ${(s.windowMs / 1000).toFixed(2)} s, busy (not idle) ${(s.busyMs / 1000).toFixed(2)} s.`,
		"",
		"| self ms | share of busy | function |",
		"| ---: | ---: | --- |",
		...s.top.map((t) => `| ${t.ms.toFixed(0)} | ${(t.share * 100).toFixed(1)} % | \`${t.fn}\` |`),
	].join("\n");
}
