/**
 * Crash consistency: writer processes killed with SIGKILL at random moments and at every step of a
 * sync. After each kill the target holds exactly one complete version (the last acknowledged one or
 * the one after it), and after the next start's cleanup no staging directory or stale version is left.
 */
import { readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { removeStaleStaging, type SyncStep, syncDirectory } from "../../src/atomicdir/index.js";
import { readVersion, versionedFiles } from "./children/versioned.js";
import {
	type Child,
	fastTempDir,
	heldVersion,
	stagingLeftovers,
	startChild,
	versionDirs,
} from "./helpers.js";

const cleanup: { dirs: string[]; children: Child[] } = { dirs: [], children: [] };
afterEach(async () => {
	for (const c of cleanup.children.splice(0)) c.kill();
	for (const d of cleanup.dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function scratch(): string {
	const d = fastTempDir("atomicdir-crash-");
	cleanup.dirs.push(d);
	return d;
}

const lastAcked = (c: Child) =>
	Math.max(0, ...c.lines.filter((l) => l.startsWith("acked ")).map((l) => Number(l.slice(6))));

/** Checks the target after a kill, runs the next start's cleanup, checks again; returns the held version. */
async function checkAfterKill(target: string, swap: "exchange" | "symlink", allowed: number[]) {
	const held = heldVersion(target);
	expect(allowed).toContain(held);
	expect(await removeStaleStaging(target)).toEqual([]);
	expect(stagingLeftovers(join(target, ".."))).toEqual([]);
	if (swap === "symlink") expect(versionDirs(target)).toHaveLength(1);
	expect(heldVersion(target)).toBe(held);
	return held;
}

/**
 * One lane: a target killed `rounds` times; returns how many kills left staging behind. The next
 * writer starts (and loads libc) while the current one runs, and begins syncing only on "go".
 */
async function killLoop(swap: "exchange" | "symlink", rounds: number) {
	const target = join(scratch(), "certs");
	await syncDirectory(target, versionedFiles(1), { swap });
	const spawnWriter = () => startChild("writer", [target, swap, "0", "0", "1"], { WAIT_GO: "1" });
	let held = 1;
	let leftStaging = 0;
	let midSync = 0;
	let next = spawnWriter();
	for (let round = 0; round < rounds; round++) {
		const writer = await next;
		cleanup.children.push(writer);
		await writer.waitFor((l) => l === "ready");
		next = round + 1 < rounds ? spawnWriter() : Promise.reject(new Error("no more rounds"));
		next.catch(() => {});
		writer.send(`go ${held + 1}`);
		await writer.waitFor((l) => l.startsWith("acked "));
		await new Promise((r) => setTimeout(r, Math.random() * 8));
		writer.kill("SIGKILL");
		const exit = await writer.exited;
		expect(exit.signal).toBe("SIGKILL");
		const acked = Math.max(held, lastAcked(writer));
		if (stagingLeftovers(join(target, "..")).length > 0) leftStaging += 1;
		const now = await checkAfterKill(target, swap, [acked, acked + 1]);
		if (now === acked + 1) midSync += 1;
		held = now;
	}
	return { leftStaging, midSync, held };
}

/** The state letter of a process's main thread (R running or runnable, S waiting in the kernel, ...). */
function threadState(pid: number): string {
	const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
	return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
}

/**
 * Blocks this process (so nothing reads the writer's output, as on a loaded machine) until the writer has
 * published `ahead` versions past `from`, or sleeps in the kernel with the target unchanged for `polls`
 * polls in a row (it waits for its output to be read). Returns the version seen last.
 */
function stallUntilWriterStops(target: string, pid: number, from: number, ahead: number, polls = 50): number {
	const tick = new Int32Array(new SharedArrayBuffer(4));
	// Blocking, vitest's own timeout can't fire: a writer that died (a zombie, unreaped) or a loop that
	// never ends fails here instead of hanging the worker.
	const giveUp = Date.now() + 120_000;
	let last = from;
	let still = 0;
	for (;;) {
		const v = readVersion(join(target, "tls.crt"), "tls.crt");
		if (typeof v === "number" && v >= from + ahead) return v;
		const state = threadState(pid);
		if (state === "Z" || Date.now() > giveUp) throw new Error(`writer ${pid} is ${state} at version ${v}`);
		still = v === last && state === "S" ? still + 1 : 0;
		if (still >= polls) return last;
		if (typeof v === "number") last = v;
		Atomics.wait(tick, 0, 0, 1); // the poll interval
	}
}

describe("atomicdir crash consistency", () => {
	it("a writer killed while the test reads nothing has published at most one version past the last acknowledgement the test reads", async () => {
		// Node 24 writes stdout to a pipe without blocking: a writer that only queued "acked <n>" went on
		// syncing, and the SIGKILL dropped the queue (CI: held 492, last acknowledgement read 448).
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1), { swap: "exchange" });
		const writer = await startChild("writer", [target, "exchange", "2", "0", "0"]);
		cleanup.children.push(writer);
		await writer.waitFor((l) => l.startsWith("acked "));
		const reached = stallUntilWriterStops(target, writer.pid, lastAcked(writer), 3000);
		writer.kill("SIGKILL");
		expect((await writer.exited).signal).toBe("SIGKILL");
		const acked = lastAcked(writer);
		expect(reached).toBeGreaterThan(2);
		expect(await checkAfterKill(target, "exchange", [acked, acked + 1])).toBeGreaterThanOrEqual(reached);
	});

	it("SIGKILL at random moments: 300 rounds (200 exchange, 100 symlink) leave one complete version each time", async () => {
		const started = Date.now();
		const swaps = ["exchange", "exchange", "symlink"] as const;
		const lanes = await Promise.all(swaps.map((swap) => killLoop(swap, 100)));
		lanes.forEach((lane, i) => {
			console.log(
				`[crash ${swaps[i]}] 100 kills: ${lane.leftStaging} left staging (all removed by the next start), ` +
					`${lane.midSync} killed between publish and acknowledgement, version reached ${lane.held}`,
			);
		});
		console.log(`[crash] 300 kills in ${((Date.now() - started) / 1000).toFixed(1)} s`);
		for (const lane of lanes) expect(lane.held).toBeGreaterThan(100);
	}, 180_000);

	const exchangeSteps: [SyncStep, number, number][] = [
		["locked", 1, 1],
		["staging-created", 1, 1],
		["file-written", 1, 1],
		["file-written", 2, 1],
		["file-written", 3, 1],
		["staging-synced", 1, 1],
		["swapped", 1, 2],
		["parent-synced", 1, 2],
		["cleaned", 1, 2],
	];
	const symlinkSteps: [SyncStep, number, number][] = [
		["locked", 1, 1],
		["staging-created", 1, 1],
		["file-written", 2, 1],
		["staging-synced", 1, 1],
		["data-flipped", 1, 2],
		["swapped", 1, 2],
		["links-updated", 1, 2],
		["cleaned", 1, 2],
	];
	const rows = [
		...exchangeSteps.map(([step, nth, want]) => ["exchange", step, nth, want] as const),
		...symlinkSteps.map(([step, nth, want]) => ["symlink", step, nth, want] as const),
	];
	it.each(rows)(
		"%s: killed at %s (#%i) holds version %i, and the next start cleans up",
		async (swap, step, nth, want) => {
			const target = join(scratch(), "certs");
			await syncDirectory(target, versionedFiles(1), { swap });
			const writer = await startChild("writer", [target, swap, "2", "2", "1"], {
				CRASH_STEP: step,
				CRASH_NTH: String(nth),
			});
			cleanup.children.push(writer);
			const exit = await writer.exited;
			expect(exit.signal).toBe("SIGKILL");
			expect(await checkAfterKill(target, swap, [want])).toBe(want);
		},
	);

	it.each(["exchange", "symlink"] as const)(
		"%s: a first sync killed before publishing leaves no target and no staging after cleanup",
		async (swap) => {
			const target = join(scratch(), "certs");
			const writer = await startChild("writer", [target, swap, "1", "1", "1"], {
				CRASH_STEP: "staging-synced",
			});
			cleanup.children.push(writer);
			expect((await writer.exited).signal).toBe("SIGKILL");
			expect(stagingLeftovers(join(target, ".."))).toHaveLength(1);
			expect(await removeStaleStaging(target)).toEqual([]);
			expect(stagingLeftovers(join(target, ".."))).toEqual([]);
			await expect(syncDirectory(target, versionedFiles(5), { swap })).resolves.toMatchObject({
				first: true,
			});
			expect(heldVersion(target)).toBe(5);
		},
	);
});
