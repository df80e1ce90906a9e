/**
 * Reader stress: a writer process publishes a 3-file set thousands of times while reader processes
 * read it in a loop. Readers that follow the documented contract must never pair files of two
 * versions; the naive per-path reader's rate is printed to show why the contract exists.
 * Runs on tmpfs when there is one, without fsync: what readers can see does not depend on durability.
 */
import { writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { syncDirectory, writeFileAtomic } from "../../src/atomicdir/index.js";
import { combinedContent, versionedFiles } from "./children/versioned.js";
import { type Child, fastTempDir, heldVersion, type ReaderStats, startChild } from "./helpers.js";

const cleanup: { dirs: string[]; children: Child[] } = { dirs: [], children: [] };
afterEach(async () => {
	for (const c of cleanup.children.splice(0)) c.kill();
	for (const d of cleanup.dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function hammer(swap: "exchange" | "symlink" | "file", swaps: number, tiers: string[]) {
	const parent = fastTempDir();
	cleanup.dirs.push(parent);
	const target = join(parent, "certs");
	const stop = join(parent, "stop");
	if (swap === "file") {
		await syncDirectory(target, {}, { durable: false });
		await writeFileAtomic(join(target, "combined.pem"), { content: combinedContent(0), mode: 0o600 });
	} else {
		await syncDirectory(target, versionedFiles(0), { swap, durable: false });
	}
	const readers = await Promise.all(tiers.map((t) => startChild("reader", [target, t, stop])));
	cleanup.children.push(...readers);
	const started = Date.now();
	const writer = await startChild("writer", [target, swap, "1", String(swaps), "0"]);
	cleanup.children.push(writer);
	const done = await writer.exited;
	expect(done.stderr).toBe("");
	expect(done.code).toBe(0);
	const seconds = (Date.now() - started) / 1000;
	writeFileSync(stop, "");
	await Promise.all(readers.map((r) => r.exited));
	const stats = readers.map((r) => JSON.parse(r.lines.at(-1) ?? "{}") as ReaderStats);
	for (const s of stats) {
		const rate = s.reads === 0 ? 0 : (100 * s.mismatches) / s.reads;
		console.log(
			`[stress ${swap}] ${swaps} swaps in ${seconds.toFixed(1)} s; ${s.tier}: ${s.reads} reads, ` +
				`${s.mismatches} mismatched (${rate.toFixed(2)} %), ${s.torn} torn, ${s.retries} retries`,
		);
	}
	return { target, stats: new Map(stats.map((s) => [s.tier, s])) };
}

function expectConsistent(s: ReaderStats | undefined) {
	expect(s).toBeDefined();
	expect(s!.reads).toBeGreaterThan(100);
	expect(s!.mismatches).toBe(0);
	expect(s!.torn).toBe(0);
}

describe("atomicdir reader stress", () => {
	it("exchange: readers through one directory handle or checking the directory identity never mix versions over 10,000 swaps", async () => {
		const { target, stats } = await hammer("exchange", 10_000, ["dirfd", "identity", "naive"]);
		expectConsistent(stats.get("dirfd"));
		expectConsistent(stats.get("identity"));
		expect(stats.get("naive")!.torn).toBe(0);
		expect(heldVersion(target)).toBe(10_000);
	}, 180_000);

	it("symlink: readers resolving ..data once never mix versions over 2,000 flips", async () => {
		const { target, stats } = await hammer("symlink", 2_000, ["symlink", "naive"]);
		expectConsistent(stats.get("symlink"));
		expect(heldVersion(target)).toBe(2_000);
	});

	it("combined file: a reader with one open never mixes versions over 3,000 replacements", async () => {
		const { stats } = await hammer("file", 3_000, ["combined"]);
		expectConsistent(stats.get("combined"));
	});
});
