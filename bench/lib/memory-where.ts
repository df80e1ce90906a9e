/**
 * Where a process's resident memory is (bench/lib/memory-probe.cjs measures it inside the process): V8's heap,
 * V8's own malloc'ed zones, glibc's arenas, the other anonymous mappings and the files.
 */
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const MIB = 2 ** 20;

/** The probe's path, for `node --require` and for a process that asks it directly (memoryWhere). */
export const memoryProbe = fileURLToPath(new URL("./memory-probe.cjs", import.meta.url));

export interface MemoryWhere {
	v8Physical: number;
	v8Malloced: number;
	v8PeakMalloced: number;
	mainArena: number;
	threadArenas: number;
	threadArenaCount: number;
	otherAnon: number;
	files: number;
	stacks: number;
}

/** One line on where the RSS is: V8's heap, V8's zones, glibc's arenas, the rest (bench/lib/memory-probe.cjs). */
export function whereLine(rss: number, w: MemoryWhere): string {
	const mib = (b: number) => `${(b / MIB).toFixed(0)} MiB`;
	const v8Elsewhere = Math.max(0, w.otherAnon - w.v8Physical);
	return [
		`RSS ${mib(rss)}`,
		`V8 heap pages ${mib(w.v8Physical)} (anonymous mappings other than glibc's arenas: ${mib(w.otherAnon)}, so ${mib(v8Elsewhere)} of them are not V8's heap: mmap'd malloc chunks, V8's code range, stacks of threads)`,
		`glibc main arena (brk) ${mib(w.mainArena)}`,
		`glibc thread arenas ${mib(w.threadArenas)} in ${w.threadArenaCount}`,
		`V8's own malloc (zones) ${mib(w.v8Malloced)} now, ${mib(w.v8PeakMalloced)} at its peak (inside the arenas)`,
		`files (node, libraries) ${mib(w.files)}`,
		`main stack ${mib(w.stacks)}`,
	].join("; ");
}

/** This process's MemoryWhere, from the probe at `probePath` (a bundled script cannot resolve it itself). */
export function memoryWhere(probePath: string): MemoryWhere {
	return (createRequire(import.meta.url)(probePath) as { where(): MemoryWhere }).where();
}
