/**
 * Preloaded into a bench daemon (`node --expose-gc --require bench/lib/memory-probe.cjs`): on SIGUSR2 it
 * appends one JSON line to $CERTIFICATEE_BENCH_MEMORY: process.memoryUsage() before and after a full collection
 * (with --expose-gc). The bench signals it only between cycles; certificatee itself does not handle SIGUSR2.
 * With $CERTIFICATEE_BENCH_HEAPSNAPSHOT=<dir>, the signals named in $CERTIFICATEE_BENCH_HEAPSNAPSHOT_AT
 * ("1,20": the first and the twentieth) also write a heap snapshot there (bench/lib/heapsnapshot.ts sums it up).
 * Each line also says where the resident memory is after the collection (`where`, bytes): V8's heap as V8 counts
 * it (physical size of its spaces) and its own malloc'ed memory (compiler and parser zones), and the process's
 * mappings from /proc/self/smaps by kind: glibc's main arena (the brk "[heap]"), its thread arenas (anonymous
 * mappings at a 64 MiB boundary, glibc's HEAP_MAX_SIZE), the other anonymous mappings (V8's 256 KiB pages counted
 * apart, large objects, mmap'd malloc chunks, stacks) and file-backed ones (node's binary, libraries).
 */
const { appendFileSync, readFileSync } = require("node:fs");
const { join } = require("node:path");
const { getHeapStatistics, writeHeapSnapshot } = require("node:v8");

const ARENA = 64 * 1024 * 1024;
const V8_PAGE = 256 * 1024;

/** Resident bytes of this process by kind of mapping (smaps' Rss lines). */
function mappings() {
	const out = { mainArena: 0, threadArenas: 0, threadArenaCount: 0, otherAnon: 0, files: 0 };
	/** The other anonymous mappings, to say which kind of region holds that memory: [virtual, resident] bytes. */
	const anon = [];
	let kind;
	let size = 0;
	for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
		const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$/.exec(line);
		if (head) {
			const start = Number.parseInt(head[1], 16);
			size = Number.parseInt(head[2], 16) - start;
			const path = head[5];
			if (path === "[heap]") kind = "mainArena";
			else if (path !== "" && !path.startsWith("[")) kind = "files";
			else if (path === "" && start % ARENA === 0 && head[3].startsWith("rw")) {
				kind = "threadArenas";
				out.threadArenaCount += 1;
			} else kind = "otherAnon";
			continue;
		}
		const rss = /^Rss:\s+(\d+) kB$/.exec(line);
		if (rss && kind) {
			out[kind] += Number(rss[1]) * 1024;
			if (kind === "otherAnon" && rss[1] !== "0") anon.push([size, Number(rss[1]) * 1024]);
		}
	}
	anon.sort((a, b) => b[1] - a[1]);
	// V8 maps its heap in 256 KiB pages (its regular pages; large objects get their own mapping).
	const pages = anon.filter(([virt]) => virt === V8_PAGE);
	return {
		...out,
		otherAnonRegions: anon.length,
		otherAnonTop: anon.slice(0, 4),
		v8PageRegions: pages.length,
		v8PageRegionsRss: pages.reduce((n, [, r]) => n + r, 0),
	};
}

function where() {
	const v8 = getHeapStatistics();
	return {
		v8Physical: v8.total_physical_size,
		v8Malloced: v8.malloced_memory,
		v8PeakMalloced: v8.peak_malloced_memory,
		...mappings(),
	};
}

const file = process.env.CERTIFICATEE_BENCH_MEMORY;
const snapshotDir = process.env.CERTIFICATEE_BENCH_HEAPSNAPSHOT;
const snapshotAt = new Set((process.env.CERTIFICATEE_BENCH_HEAPSNAPSHOT_AT ?? "").split(",").map(Number));
let signals = 0;
if (file) {
	process.on("SIGUSR2", () => {
		signals += 1;
		const collect = typeof globalThis.gc === "function";
		const before = process.memoryUsage();
		if (collect) globalThis.gc();
		const after = process.memoryUsage();
		const snapshot =
			snapshotDir && snapshotAt.has(signals)
				? writeHeapSnapshot(join(snapshotDir, `daemon-${signals}.heapsnapshot`))
				: undefined;
		appendFileSync(
			file,
			`${JSON.stringify({ at: Date.now(), collected: collect, before, after, where: where(), snapshot })}\n`,
		);
	});
}
module.exports = { where };
