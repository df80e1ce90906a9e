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
	/** Every other anonymous mapping: V8's pages, large objects, mmap'd malloc chunks, stacks. */
	otherAnon: number;
	/** How many of those hold memory, and the largest by resident size: [virtual, resident] bytes. */
	otherAnonRegions: number;
	otherAnonTop: Array<[number, number]>;
	/** Those of V8's page size (256 KiB): its heap's pages, freed ones it keeps mapped included. */
	v8PageRegions: number;
	v8PageRegionsRss: number;
	files: number;
}

/** One line on where the RSS is: V8's heap pages, the other mappings, glibc's arenas, V8's zones, the files. */
export function whereLine(rss: number, w: MemoryWhere): string {
	const mib = (b: number) => `${(b / MIB).toFixed(0)} MiB`;
	const pages = w.v8PageRegionsRss;
	const kept =
		pages > w.v8Physical
			? `: the other ${mib(pages - w.v8Physical)}, most likely, are freed pages V8 keeps mapped to reuse`
			: "";
	return [
		`RSS ${mib(rss)}`,
		`V8's 256 KiB heap pages ${mib(pages)} in ${w.v8PageRegions} mappings (V8 counts ${mib(w.v8Physical)} as its heap, large objects included${kept})`,
		`other anonymous mappings ${mib(Math.max(0, w.otherAnon - pages))} in ${w.otherAnonRegions - w.v8PageRegions} (large objects, mmap'd malloc chunks, thread stacks; the largest ${w.otherAnonTop.map(([v, r]) => `${mib(r)} of ${mib(v)}`).join(", ")} resident of virtual)`,
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
