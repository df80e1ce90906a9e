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
	/** How many other anonymous mappings hold memory, and the largest by resident size: [virtual, resident]. */
	otherAnonRegions?: number;
	otherAnonTop?: Array<[number, number]>;
	/** Those of V8's page size (256 KiB): its heap's pages, pooled ones included. */
	v8PageRegions?: number;
	v8PageRegionsRss?: number;
	files: number;
	stacks: number;
}

/** One line on where the RSS is: V8's heap, V8's zones, glibc's arenas, the rest (bench/lib/memory-probe.cjs). */
export function whereLine(rss: number, w: MemoryWhere): string {
	const mib = (b: number) => `${(b / MIB).toFixed(0)} MiB`;
	const pages = w.v8PageRegionsRss;
	const v8 =
		pages === undefined
			? [`V8's heap ${mib(w.v8Physical)} (its physical size)`, `other anonymous mappings ${mib(w.otherAnon)}`]
			: [
					`V8's 256 KiB heap pages ${mib(pages)} in ${w.v8PageRegions} mappings (V8 counts ${mib(w.v8Physical)} as its heap, large objects included${pages > w.v8Physical ? `: the other ${mib(pages - w.v8Physical)}, most likely, are freed pages V8 keeps mapped to reuse` : ""})`,
					`other anonymous mappings ${mib(Math.max(0, w.otherAnon - pages))} in ${(w.otherAnonRegions ?? 0) - (w.v8PageRegions ?? 0)} (large objects, mmap'd malloc chunks, thread stacks; the largest ${(w.otherAnonTop ?? []).map(([v, r]) => `${mib(r)} of ${mib(v)}`).join(", ")} resident of virtual)`,
				];
	return [
		`RSS ${mib(rss)}`,
		...v8,
		`glibc main arena (brk) ${mib(w.mainArena)}`,
		`glibc thread arenas ${mib(w.threadArenas)} in ${w.threadArenaCount}`,
		`V8's own malloc (zones, inside the arenas) ${mib(w.v8Malloced)} now, ${mib(w.v8PeakMalloced)} at its peak`,
		`files (node, libraries) ${mib(w.files)}`,
	].join("; ");
}

/** This process's MemoryWhere, from the probe at `probePath` (a bundled script cannot resolve it itself). */
export function memoryWhere(probePath: string): MemoryWhere {
	return (createRequire(import.meta.url)(probePath) as { where(): MemoryWhere }).where();
}
