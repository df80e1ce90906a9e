import { describe, expect, it } from "vitest";
import { importCycles, importGraph } from "./graph.js";

/** Cycles allowed (files sorted, joined by " <-> "): none. */
const KNOWN = new Set<string>([]);

describe("architecture: import cycles", () => {
	it("finds a cycle where there is one (a -> b -> c -> a), and none in a chain", () => {
		const cyclic = new Map([
			["a.ts", ["b.ts"]],
			["b.ts", ["c.ts"]],
			["c.ts", ["a.ts", "d.ts"]],
			["d.ts", []],
		]);
		expect(importCycles(cyclic)).toEqual([["a.ts", "b.ts", "c.ts"]]);
		expect(
			importCycles(
				new Map([
					["a.ts", ["b.ts"]],
					["b.ts", []],
				]),
			),
		).toEqual([]);
	});

	it("no module of src/ imports itself back through others (type-only imports count)", () => {
		const found = importCycles(importGraph()).map((c) => c.join(" <-> "));
		expect(found.filter((c) => !KNOWN.has(c))).toEqual([]);
		// A cycle broken since is taken off the list.
		expect([...KNOWN].filter((c) => !found.includes(c))).toEqual([]);
	});
});
