import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "../../src");

/** Lowest first; a file belongs to the first layer whose pattern matches its path under src/. */
const LAYERS: Array<[string, RegExp]> = [
	["base", /^([\w-]+\.ts|base\/|certificates\/|atomicdir\/)/],
	["store", /^store\//],
	// etcd: the connection, the etcd StateStore, leadership, membership (docs/cluster.md).
	["cluster", /^cluster\//],
	["reconcile model", /^reconcile\/model\.ts$/],
	["probe", /^probe\//],
	[
		// A kind as the configuration sees it (kind.ts: schema, role, paths, endpoints), listed in sources/kinds.ts
		// and targets/kinds.ts, below the config that assembles them.
		"kind schemas, HAProxy-wide helpers",
		/^(sources|targets|renewal)\/([\w-]+\/)?(schema|kind)\.ts$|^(sources|targets)\/kinds\.ts$|^targets\/haproxy\/[\w-]+\.ts$/,
	],
	["config", /^config\//],
	["sources, renewal", /^(sources|renewal)\//],
	["desired", /^desired\//],
	["reconcile", /^reconcile\//],
	// The HAProxy engine (targets/haproxy/engine/: fleet, endpoint, classify, plan) sits with the drivers it runs.
	["targets", /^targets\//],
	["metrics", /^metrics\//],
	["daemon", /^daemon\//],
	["cli, demo", /^(cli|demo)\//],
];

/** Folders that must not import one another although their layers would allow it. */
const APART: Array<[RegExp, RegExp]> = [
	// The core never imports an adapter (a kind's folder, the HAProxy engine among them): a kind plugs in from
	// above, through the registries. config/ sees the kinds through sources/kinds.ts and
	// targets/kinds.ts.
	[
		/^(reconcile|desired|renewal|store|cluster|probe|base|certificates|atomicdir)\/|^[\w-]+\.ts$/,
		/^(sources|targets)\/[\w-]+\//,
	],
	// reconcile sees certificates only as the desired set, never what made it.
	[/^reconcile\//, /^(config|sources|renewal|desired)\//],
	// A kind gets its options parsed by its own schema; only the registries see the assembled config.
	[/^(sources|targets)\/[\w-]+\//, /^config\//],
	// The directory kind speaks the core's words (reconcile/verdict.ts, model.ts), not the HAProxy engine's.
	[/^targets\/directory\//, /^targets\/haproxy/],
	// The two HAProxy kinds share targets/haproxy/, not each other.
	[/^targets\/haproxy-runtime\//, /^targets\/haproxy-dataplane\//],
	[/^targets\/haproxy-dataplane\//, /^targets\/haproxy-runtime\//],
];

/** Upward imports that remain today, each for a part of issue 22 to remove. */
const KNOWN = new Set<string>([]);

const layerOf = (file: string) => LAYERS.findIndex(([, pattern]) => pattern.test(file));
const IMPORT =
	/^\s*(?:import|export)\b[^;]*?\bfrom\s*"(\.[^"]+)"|^\s*import\s*"(\.[^"]+)"|\bimport\(\s*"(\.[^"]+)"\s*\)/gm;

function sourceFiles(dir: string): string[] {
	return readdirSync(dir, { withFileTypes: true, recursive: true })
		.filter((e) => e.isFile() && e.name.endsWith(".ts"))
		.map((e) => relative(SRC, join(e.parentPath, e.name)));
}

describe("architecture: layers", () => {
	it("no module imports from a higher layer, nor across folders kept apart (data flows one way)", () => {
		const wrong: string[] = [];
		for (const file of sourceFiles(SRC)) {
			expect(layerOf(file), `${file} is in no layer: add its folder to LAYERS`).toBeGreaterThanOrEqual(0);
			for (const m of readFileSync(join(SRC, file), "utf8").matchAll(IMPORT)) {
				const spec = m[1] ?? m[2] ?? m[3] ?? "";
				const target = relative(SRC, resolve(SRC, dirname(file), spec)).replace(/\.js$/, ".ts");
				const edge = `${file} -> ${target}`;
				if (KNOWN.has(edge)) continue;
				if (layerOf(target) > layerOf(file)) {
					wrong.push(`${edge} (${LAYERS[layerOf(file)]?.[0]} imports ${LAYERS[layerOf(target)]?.[0]})`);
				}
				if (APART.some(([from, to]) => from.test(file) && to.test(target)))
					wrong.push(`${edge} (kept apart)`);
			}
		}
		expect(wrong).toEqual([]);
	});
});
