/**
 * Documentation is part of done: every configuration key, CLI command and option, exit code, error code, metric,
 * HTTP path and environment variable of the code is named in README.md or docs/*.md, a kind's keys in the doc
 * docs/configuration.md's kind tables link. The zod schemas, the command table, EXIT, ERROR_CODES and the metrics
 * registry are imported; what would start something or is private (main.ts's global options, the listener's
 * routes, the daemon's process metrics), report codes and environment variables are read from the source text.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { COMMANDS } from "../../src/cli/command-table.js";
import { EXIT } from "../../src/cli/exit.js";
import { SECRET_KEYS } from "../../src/config/interpolate.js";
import { configSchema } from "../../src/config/schema.js";
import { ERROR_CODES } from "../../src/errors.js";
import { createMetrics } from "../../src/metrics/index.js";
import { sourceKinds } from "../../src/sources/kinds.js";
import { targetKinds } from "../../src/targets/kinds.js";

const ROOT = join(import.meta.dirname, "../..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
const DOCS = new Map(
	["README.md", ...readdirSync(join(ROOT, "docs")).map((f) => `docs/${f}`)]
		.filter((f) => f.endsWith(".md"))
		.map((f) => [f, read(f)]),
);
const ALL_DOCS = [...DOCS.values()].join("\n");
/** Every .ts file under src/, by its path from the repository's root. */
const SOURCES = new Map(
	readdirSync(join(ROOT, "src"), { withFileTypes: true, recursive: true })
		.filter((e) => e.isFile() && e.name.endsWith(".ts"))
		.map((e) => relative(ROOT, join(e.parentPath, e.name)))
		.map((f) => [f, read(f)]),
);

/** A name the docs must hold: where the code defines it, the one doc it must be in (else any), how it is found. */
type Wanted = { name: string; where: string; doc?: string; pattern?: RegExp };

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
/** A whole name: `timeout` is not found inside `dns_hook_timeout`, nor `--file` inside `--file-mode`. */
const token = (name: string) => new RegExp(`(?<![\\w-])${literal(name)}(?![\\w-])`);

/** The wanted names no doc holds, each with where the code defines it and where it was looked for. */
function undocumented(wanted: readonly Wanted[]): string[] {
	const seen = new Set<string>();
	return wanted.flatMap((w) => {
		const text = w.doc === undefined ? ALL_DOCS : (DOCS.get(w.doc) ?? "");
		const line = `${w.name} (${w.where}) is not in ${w.doc ?? "README.md or docs/*.md"}`;
		if ((w.pattern ?? token(w.name)).test(text) || seen.has(line)) return [];
		seen.add(line);
		return [line];
	});
}

/** `sources:directory` → docs/sources-and-renewal.md, from the rows of docs/configuration.md's kind tables. */
function kindDocs(): Map<string, string> {
	const docs = new Map<string, string>();
	for (const section of read("docs/configuration.md").split(/^## /m)) {
		const root = { Source: "sources", Target: "targets" }[/^(Source|Target) kinds/.exec(section)?.[1] ?? ""];
		for (const m of root ? section.matchAll(/^\| `([\w-]+)`.*\]\(([\w.-]+\.md)/gm) : [])
			docs.set(`${root}:${m[1]}`, `docs/${m[2]}`);
	}
	return docs;
}
const KIND_DOCS = kindDocs();

/** What the walk reads of a zod schema's definition: an object's shape, a union's options, what a wrapper wraps. */
type Def = { shape?: Record<string, z.ZodType>; options?: z.ZodType[]; values?: unknown[] } & {
	[inner in "innerType" | "in" | "element" | "valueType"]?: z.ZodType;
};
const def = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** Where a key sits: its path in the file, the code that declares it, the doc that must name it (a kind's). */
type Place = { path: string; file: string; doc?: string };

/** A union option under `sources[]` or `targets[]` is a kind: its keys belong in its doc. */
function kindPlace(option: z.ZodType, at: Place): Place {
	const root = /^(sources|targets)\[\]$/.exec(at.path)?.[1];
	const typeField = def(option).shape?.type;
	const type = typeField && def(typeField).values?.[0];
	if (root === undefined || typeof type !== "string") return at;
	const doc = KIND_DOCS.get(`${root}:${type}`);
	return { path: `${root}[type=${type}]`, file: `src/${root}/${type}/`, ...(doc ? { doc } : {}) };
}

/** Every key of the configuration, walked through objects, unions, arrays, records and wrappers. */
function configKeys(
	schema: z.ZodType,
	at: Place = { path: "", file: "configSchema, src/config/" },
): Wanted[] {
	const d = def(schema);
	const out: Wanted[] = [];
	for (const [key, child] of Object.entries(d.shape ?? {})) {
		const place = { ...at, path: at.path ? `${at.path}.${key}` : key };
		const names = (SECRET_KEYS as readonly string[]).includes(key) ? [key, `${key}_file`] : [key];
		for (const name of names)
			out.push({ name, where: `${place.path}, ${place.file}`, ...(place.doc ? { doc: place.doc } : {}) });
		out.push(...configKeys(child, place));
	}
	for (const option of d.options ?? []) out.push(...configKeys(option, kindPlace(option, at)));
	if (d.element) out.push(...configKeys(d.element, { ...at, path: `${at.path}[]` }));
	if (d.valueType) out.push(...configKeys(d.valueType, { ...at, path: `${at.path}.<name>` }));
	for (const inner of [d.innerType, d.in]) if (inner) out.push(...configKeys(inner, at));
	return out;
}

const flagsOf = (flags: string): string[] => flags.match(/(?<![\w<])-{1,2}[\w-]+/g) ?? [];

/** Every command (`certificatee ca export`), its options on a line that names it, and the global options. */
function cliNames(): Wanted[] {
	const out: Wanted[] = [];
	for (const c of COMMANDS) {
		const command = `certificatee ${c.name}`;
		out.push({ name: command, where: "COMMANDS, src/cli/command-table.ts" });
		for (const flag of (c.options ?? []).flatMap((o) => flagsOf(o.flags))) {
			const pattern = new RegExp(`${literal(command)}(?![\\w-]).*(?<![\\w-])${literal(flag)}(?![\\w-])`);
			out.push({ name: `${command} ${flag}`, where: "COMMANDS, src/cli/command-table.ts", pattern });
		}
	}
	const main = read("src/cli/main.ts");
	for (const m of main.matchAll(/(?:new Option\(|\.option\(|\.version\(VERSION,)\s*"([^"]+)"/g))
		for (const flag of flagsOf(m[1] ?? ""))
			out.push({ name: flag, where: "global options, src/cli/main.ts" });
	return out;
}

/** Each exit code as a row of an exit-code table (`| 2 | …`). */
const exitCodes = (): Wanted[] =>
	Object.entries(EXIT).map(([key, code]) => ({
		name: `exit code ${code}`,
		where: `EXIT.${key}, src/cli/exit.ts`,
		pattern: new RegExp(`^\\|\\s*${code}\\s*\\|`, "m"),
	}));

/** ERROR_CODES, and the codes reports carry beside them (`code: "ROLLOUT_HOLD"`, `code: x ?? "ORDER_CAPPED"`). */
function errorCodes(): Wanted[] {
	const out: Wanted[] = ERROR_CODES.map((code) => ({ name: code, where: "ERROR_CODES, src/errors.ts" }));
	for (const [file, text] of SOURCES)
		for (const line of text.split("\n").filter((l) => /\bcode\??:\s/.test(l)))
			for (const m of line.matchAll(/"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"/g))
				if (!(ERROR_CODES as readonly string[]).includes(m[1] ?? ""))
					out.push({ name: m[1] ?? "", where: `a report's code, ${file}` });
	return out;
}

/** The registry's metrics (cluster ones included), and the daemon's own from process.ts's text. */
function metricNames(): Wanted[] {
	const metrics = createMetrics();
	metrics.recordCluster(() => undefined);
	const registered = metrics.registry
		.getMetricsAsArray()
		.map((m) => ({ name: m.name, where: "createMetrics(), src/metrics/" }));
	const daemon = [...read("src/metrics/process.ts").matchAll(/name: "(\w+)"/g)].map((m) => ({
		name: m[1] ?? "",
		where: "registerDaemonMetrics, src/metrics/process.ts",
	}));
	return [...registered, ...daemon];
}

/** The listener's routes and the HTTP-01 responder's path, each as a code span (`/healthz`). */
function httpPaths(): Wanted[] {
	const span = (name: string, where: string): Wanted => ({
		name,
		where,
		pattern: new RegExp(`\`${literal(name)}(?![\\w.-])`),
	});
	const routes = [...read("src/metrics/server.ts").matchAll(/\["(\/[^"]*)", serve\w+\]/g)];
	// http01.ts's `const PATH = /^\/\.well-known\/acme-challenge\/([A-Za-z0-9_-]+)$/`: the part before the token.
	const http01 = /const PATH = \/\^(.*?)\(/
		.exec(read("src/sources/acme/http01.ts"))?.[1]
		?.replaceAll("\\", "");
	return [
		...routes.map((m) => span(m[1] ?? "", "ROUTES, src/metrics/server.ts")),
		span(http01 ?? "(PATH not found)", "the HTTP-01 responder, src/sources/acme/http01.ts"),
	];
}

const envVars = (): Wanted[] =>
	[...SOURCES].flatMap(([file, text]) =>
		[...text.matchAll(/\bCERTIFICATEE_[A-Z][A-Z_]*[A-Z]\b/g)].map((m) => ({ name: m[0], where: file })),
	);

const CATEGORIES: Record<string, Wanted[]> = {
	"configuration key": configKeys(configSchema),
	"CLI command and option": cliNames(),
	"exit code": exitCodes(),
	"error code": errorCodes(),
	metric: metricNames(),
	"HTTP path": httpPaths(),
	"environment variable": envVars(),
};

describe("architecture: the docs name everything the code defines", () => {
	/** A few names of each category, read each way: a pattern that stopped matching the code fails here. */
	const SAMPLES: Record<string, string[]> = {
		"configuration key": ["listen_token_file", "tsig_secret_file", "crt_base", "max_per_hour"],
		"CLI command and option": ["certificatee ca export", "certificatee demo --state-dir", "-V"],
		"exit code": ["exit code 0", "exit code 1", "exit code 2"],
		"error code": ["CONFIG_INVALID", "ROLLOUT_HOLD", "CHAIN_BROKEN", "ORDER_CAPPED"],
		metric: ["certificatee_cluster_leader", "certificatee_cycle_duration_seconds", "certificatee_build_info"],
		"HTTP path": ["/", "/readyz", "/.well-known/acme-challenge/"],
		"environment variable": ["CERTIFICATEE_CONFIG", "CERTIFICATEE_ENCRYPTION_KEY"],
	};
	it.each(Object.entries(SAMPLES))("reads every %s from the code", (category, samples) => {
		expect((CATEGORIES[category] ?? []).map((w) => w.name)).toEqual(expect.arrayContaining(samples));
	});

	it("every source and target kind has a row in docs/configuration.md's kind tables, linking a doc that exists", () => {
		const kinds = [sourceKinds.map((k) => `sources:${k.type}`), targetKinds.map((k) => `targets:${k.type}`)];
		expect(kinds.flat().filter((k) => !DOCS.has(KIND_DOCS.get(k) ?? ""))).toEqual([]);
	});

	it.each(Object.entries(CATEGORIES))("every %s is named in README.md or docs/*.md", (_category, wanted) => {
		expect(undocumented(wanted)).toEqual([]);
	});
});
