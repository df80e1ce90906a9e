import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { measureSources, sizeProblems } from "./sizes.js";

const FILE_LIMIT = 400;
const FUNCTION_LIMIT = 60;

/**
 * Files over FILE_LIMIT lines today, each with its size: a ceiling that only comes down (issue 22). Split one and
 * take it off; an entry within the limit fails the test, so the list stays true.
 */
const FILES_OVER: Record<string, number> = {};

/**
 * Named functions over FUNCTION_LIMIT own lines today (`file: name`, a class member as `Class.method`, a name
 * repeated in a file as `name#2`), each with its own lines (its span less the named functions inside it).
 */
const FUNCTIONS_OVER: Record<string, number> = {};

describe("architecture: sizes", () => {
	it("judges sizes against an allowlist: a new offender, growth and a stale entry are problems", () => {
		const allowed = { "a.ts": 500, "b.ts": 450, "c.ts": 420, "gone.ts": 410 };
		const measured = new Map([
			["a.ts", 480], // shrunk, still over: fine
			["b.ts", 460], // grown
			["c.ts", 390], // within the limit now
			["d.ts", 401], // new offender
			["e.ts", 400], // at the limit: fine
		]);
		expect(sizeProblems(measured, allowed, 400)).toEqual([
			"b.ts: 460 lines, grown past its allowance of 450: split it, do not grow it",
			"d.ts: 401 lines, over the limit of 400: split it by responsibility",
			"c.ts: 390 lines, within 400 now: take it off the list",
			"gone.ts: allowed 410 lines but gone: take it off the list",
		]);
		expect(sizeProblems(new Map([["a.ts", 400]]), {}, 400)).toEqual([]);
	});

	it("measures a function's own lines: its span less the named functions inside it, anonymous callbacks included", () => {
		const fixtures = join(import.meta.dirname, "fixtures");
		const { files, functions } = measureSources(
			join(fixtures, "tsconfig.json"),
			"test/architecture/fixtures/",
		);
		expect([...files]).toEqual([["test/architecture/fixtures/sizes-fixture.ts", 42]]);
		expect(Object.fromEntries(functions.map((f) => [f.name, f.lines]))).toEqual({
			outer: 7,
			inner: 3,
			"Counter.constructor": 3,
			"Counter.increment": 4,
			arrow: 3,
			twice: 1,
			double: 1,
			triple: 3,
			increment: 3,
		});
	});

	it(`no file of src/ over ${FILE_LIMIT} lines, no named function over ${FUNCTION_LIMIT} own lines, but the listed`, () => {
		const { files, functions } = measureSources();
		const byName = new Map(functions.map((f) => [`${f.file}: ${f.name}`, f.lines]));
		expect(sizeProblems(files, FILES_OVER, FILE_LIMIT)).toEqual([]);
		expect(sizeProblems(byName, FUNCTIONS_OVER, FUNCTION_LIMIT)).toEqual([]);
	});
});
