/**
 * Preloaded into a bench daemon (`node --expose-gc --require bench/lib/memory-probe.cjs`): on SIGUSR2 it
 * appends one JSON line to $CERTIFICATEE_BENCH_MEMORY: process.memoryUsage() before and after a full collection
 * (with --expose-gc). The bench signals it only between cycles; certificatee itself does not handle SIGUSR2.
 */
const { appendFileSync } = require("node:fs");

const file = process.env.CERTIFICATEE_BENCH_MEMORY;
if (file) {
	process.on("SIGUSR2", () => {
		const collect = typeof globalThis.gc === "function";
		const before = process.memoryUsage();
		if (collect) globalThis.gc();
		const after = process.memoryUsage();
		appendFileSync(file, `${JSON.stringify({ at: Date.now(), collected: collect, before, after })}\n`);
	});
}
