/**
 * Preloaded into a bench daemon (`node --expose-gc --require bench/lib/memory-probe.cjs`): on SIGUSR2 it
 * appends one JSON line to $CERTIFICATEE_BENCH_MEMORY: process.memoryUsage() before and after a full collection
 * (with --expose-gc). The bench signals it only between cycles; certificatee itself does not handle SIGUSR2.
 * With $CERTIFICATEE_BENCH_HEAPSNAPSHOT=<dir>, the signals named in $CERTIFICATEE_BENCH_HEAPSNAPSHOT_AT
 * ("1,20": the first and the twentieth) also write a heap snapshot there (bench/lib/heapsnapshot.ts sums it up).
 */
const { appendFileSync } = require("node:fs");
const { join } = require("node:path");
const { writeHeapSnapshot } = require("node:v8");

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
			`${JSON.stringify({ at: Date.now(), collected: collect, before, after, snapshot })}\n`,
		);
	});
}
