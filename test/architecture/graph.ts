/** The import graph of src/ and its cycles, for the architecture tests. */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = join(import.meta.dirname, "../../src");
const IMPORT =
	/^\s*(?:import|export)\b[^;]*?\bfrom\s*"(\.[^"]+)"|^\s*import\s*"(\.[^"]+)"|\bimport\(\s*"(\.[^"]+)"\s*\)/gm;

/** Every src/ module and the modules it imports by relative path (type-only imports too). */
export function importGraph(): Map<string, string[]> {
	const files = readdirSync(SRC, { withFileTypes: true, recursive: true })
		.filter((e) => e.isFile() && e.name.endsWith(".ts"))
		.map((e) => relative(SRC, join(e.parentPath, e.name)));
	return new Map(
		files.map((file) => [
			file,
			[...readFileSync(join(SRC, file), "utf8").matchAll(IMPORT)].map((m) =>
				relative(SRC, resolve(SRC, dirname(file), m[1] ?? m[2] ?? m[3] ?? "")).replace(/\.js$/, ".ts"),
			),
		]),
	);
}

/** The strongly connected components of more than one module (Tarjan), each as its sorted files. */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
	let next = 0;
	const index = new Map<string, number>();
	const low = new Map<string, number>();
	const stack: string[] = [];
	const onStack = new Set<string>();
	const cycles: string[][] = [];
	const visit = (v: string): void => {
		index.set(v, next);
		low.set(v, next++);
		stack.push(v);
		onStack.add(v);
		for (const w of graph.get(v) ?? []) {
			if (!graph.has(w)) continue;
			if (!index.has(w)) {
				visit(w);
				low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
			} else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
		}
		if (low.get(v) !== index.get(v)) return;
		const component: string[] = [];
		let w: string | undefined;
		do {
			w = stack.pop();
			if (w === undefined) break;
			onStack.delete(w);
			component.push(w);
		} while (w !== v);
		if (component.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(component.sort());
	};
	for (const v of graph.keys()) if (!index.has(v)) visit(v);
	return cycles;
}
