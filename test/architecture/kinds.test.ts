/**
 * Each kind is declared once: outside its own folder and the registries (sources/kinds.ts, targets/kinds.ts,
 * sources/registry.ts, targets/registry.ts), no code compares a configuration's `type` with a kind's name, so
 * no `switch` or if-chain over kinds can grow elsewhere. A kind's folder names only its own kind. The names
 * come from the registries: a new kind is covered the day it is listed.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { sourceKinds } from "../../src/sources/kinds.js";
import { targetKinds } from "../../src/targets/kinds.js";

const SRC = join(import.meta.dirname, "../../src");
const REGISTRIES = ["sources/kinds.ts", "targets/kinds.ts", "sources/registry.ts", "targets/registry.ts"];
/**
 * Commands about one kind select that kind's entries (`acme rollover` its acme sources, `ca export` its local
 * CAs, `renew` and `replace` the directory sources that serve a file as it is): that kind only, nowhere else.
 */
const ONE_KIND_COMMANDS: Record<string, string> = {
	"cli/commands/acme.ts": "acme",
	"cli/commands/demo.ts": "local-ca",
	"cli/commands/renew.ts": "directory",
	"cli/commands/replace.ts": "directory",
};

const names = [...new Set([...sourceKinds, ...targetKinds].map((k) => k.type))];
const quoted = names.map((n) => n.replace(/[-]/g, "\\-")).join("|");
/** `case "acme":`, `x.type === "acme"`, `type !== "acme"`, `"acme" === x.type`. */
const COMPARISON = new RegExp(
	`case\\s+"(${quoted})"\\s*:|\\btype\\s*[!=]==?\\s*"(${quoted})"|"(${quoted})"\\s*[!=]==?\\s*[\\w?.]*\\btype\\b`,
	"g",
);

/** The kind whose folder holds the file (sources/acme/x.ts: acme), if any. */
function folderKind(file: string): string | undefined {
	const m = /^(?:sources|targets)\/([\w-]+)\//.exec(file);
	return m && names.includes(m[1] as string) ? m[1] : undefined;
}

describe("architecture: each kind declared once", () => {
	it("no code outside the registries and a kind's own folder compares a type with a kind's name", () => {
		const files = readdirSync(SRC, { withFileTypes: true, recursive: true })
			.filter((e) => e.isFile() && e.name.endsWith(".ts"))
			.map((e) => relative(SRC, join(e.parentPath, e.name)));
		const found: string[] = [];
		for (const file of files) {
			if (REGISTRIES.includes(file)) continue;
			const own = folderKind(file) ?? ONE_KIND_COMMANDS[file];
			const text = readFileSync(join(SRC, file), "utf8");
			for (const m of text.matchAll(COMPARISON)) {
				const kind = m[1] ?? m[2] ?? m[3];
				if (kind === own) continue;
				const line = text.slice(0, m.index).split("\n").length;
				found.push(`${file}:${line}: ${m[0]}`);
			}
		}
		expect(found).toEqual([]);
	});

	it("the check sees the comparisons it forbids", () => {
		const seen = (code: string) => [...code.matchAll(COMPARISON)].map((m) => m[0]);
		expect(seen('switch (s.type) { case "acme": return 1; }')).toEqual(['case "acme":']);
		expect(seen('if (t?.type === "haproxy-runtime" || t?.type !== "directory") x();')).toHaveLength(2);
		expect(seen('const a = "local-ca" === source.type;')).toHaveLength(1);
		expect(seen('if (l.kind === "directory") x(); const t = { type: "acme" };')).toEqual([]);
	});
});
