import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
const SRC = join(ROOT, "src");
/** A path a comment cites: at least one folder, then a file of the kinds the repository keeps. */
const CITED = /(?:\.\.\/)*[\w.-]+(?:\/[\w.-]+)+\.(?:md|ts|yaml|json)\b/g;

/** In a page, a path with a placeholder (`DIR/summary.md`, `endpoints/TARGET.json`) names no file of ours. */
const PLACEHOLDER = /(^|\/)[A-Z_]+\//;
/**
 * Inputs the tests look for beside the clone, not in it (the HAProxy builds and the Data Plane API spec, found
 * in an ancestor directory: docs/testing.md). Notes kept there (research) are not citable.
 */
const OUTSIDE = /^shared\/(haproxy|specs)\//;

const files = readdirSync(SRC, { withFileTypes: true, recursive: true })
	.filter((e) => e.isFile() && e.name.endsWith(".ts"))
	.map((e) => relative(ROOT, join(e.parentPath, e.name)));

/** A citation names a file of the repository from its root, src/ or docs/, the citing file, or by a tail of it. */
function inRepository(cited: string, from: string): boolean {
	const bare = cited.replace(/^(\.\.\/)+/, "");
	if ([ROOT, SRC, join(ROOT, "docs"), dirname(join(ROOT, from))].some((d) => existsSync(join(d, cited))))
		return true;
	if ([ROOT, SRC].some((d) => existsSync(join(d, bare)))) return true;
	return !cited.startsWith("..") && files.some((f) => f.endsWith(`/${cited}`));
}

describe("architecture: citations", () => {
	it("every file a source comment cites is in the repository (no notes that live outside it)", () => {
		const missing: string[] = [];
		for (const file of files) {
			const comments = readFileSync(join(ROOT, file), "utf8").match(/\/\*[\s\S]*?\*\/|\/\/.*$/gm) ?? [];
			for (const cited of comments
				.join("\n")
				.replace(/\n\s*\*\s*/g, "\n")
				.matchAll(CITED)) {
				if (!inRepository(cited[0], file)) missing.push(`${file}: ${cited[0]}`);
			}
		}
		expect(missing).toEqual([]);
	});

	it("every file the documentation cites is in the repository (README.md, docs/, deploy/, bench/ pages)", () => {
		const pages = [
			"README.md",
			...["docs", "deploy", "bench", "spec"].flatMap((d) =>
				existsSync(join(ROOT, d))
					? readdirSync(join(ROOT, d), { withFileTypes: true, recursive: true })
							.filter((e) => e.isFile() && e.name.endsWith(".md"))
							.map((e) => relative(ROOT, join(e.parentPath, e.name)))
					: [],
			),
		];
		const missing: string[] = [];
		for (const page of pages) {
			// URLs name files elsewhere (a GitHub page, an RFC): only the repository's own paths are checked.
			const text = readFileSync(join(ROOT, page), "utf8").replace(/\b[a-z]+:\/\/\S+/g, "");
			for (const m of text.matchAll(CITED)) {
				const cited = m[0];
				// An absolute path names a machine's file (a run's output, /etc/...), not one of the repository.
				if (text[m.index - 1] === "/" || !/\.(ts|md)$/.test(cited)) continue;
				if (PLACEHOLDER.test(cited) || OUTSIDE.test(cited)) continue;
				if (!inRepository(cited, page)) missing.push(`${page}: ${cited}`);
			}
		}
		expect(missing).toEqual([]);
	});
});
