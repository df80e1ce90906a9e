/**
 * certificatee benchmarks (not part of the test suite). Every scenario prints certificatee's figure beside the
 * baseline's from the same run and their ratio, and writes bench/results/<date>-<scenario>.{json,md}.
 *
 *   npm run bench                      # all four scenarios at default sizes
 *   npm run bench -- hotswap --full    # one scenario at full size
 *   npm run bench -- --help
 */
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { printResult, type ScenarioResult, writeResult } from "./lib/report.js";
import { acme } from "./scenarios/acme.js";
import { atomicdir } from "./scenarios/atomicdir.js";
import { cluster } from "./scenarios/cluster.js";
import { fleet } from "./scenarios/fleet.js";
import { parseVariants, socketFleet } from "./scenarios/fleet-socket.js";
import { hotswap } from "./scenarios/hotswap.js";
import { observe } from "./scenarios/observe.js";
import { served } from "./scenarios/served.js";
import { sources } from "./scenarios/sources.js";

const SCENARIOS = [
	"served",
	"sources",
	"hotswap",
	"observe",
	"fleet",
	"fleet-socket",
	"acme",
	"atomicdir",
	"cluster",
] as const;
type Scenario = (typeof SCENARIOS)[number];

const { values, positionals } = parseArgs({
	allowPositionals: true,
	options: {
		full: { type: "boolean", default: false },
		help: { type: "boolean", default: false },
		certs: { type: "string" },
		roll: { type: "string" },
		"fleet-endpoints": { type: "string" },
		"fleet-certs": { type: "string" },
		"fleet-cycles": { type: "string" },
		"socket-nodes": { type: "string" },
		"socket-certs": { type: "string" },
		"socket-cycles": { type: "string" },
		"socket-variants": { type: "string" },
		"heap-snapshot": { type: "string" },
		standins: { type: "string" },
		"cpu-prof": { type: "string" },
		"acme-certs": { type: "string" },
		swaps: { type: "string" },
		kills: { type: "string" },
		dir: { type: "string" },
	},
});

if (values.help) {
	console.log(`usage: npm run bench -- [${SCENARIOS.join("|")} ...] [--full] [--certs N] [--roll K]`);
	process.exit(0);
}

const num = (v: string | undefined, dflt: number) => (v === undefined ? dflt : Number(v));
const full = values.full;
const chosen = (positionals.length > 0 ? positionals : [...SCENARIOS]) as Scenario[];
for (const s of chosen) {
	if (!SCENARIOS.includes(s)) {
		console.error(`unknown scenario "${s}"; one of ${SCENARIOS.join(", ")}`);
		process.exit(2);
	}
}

const runners: Record<Scenario, () => Promise<ScenarioResult>> = {
	served: () =>
		served({
			certs: num(values.certs, full ? 5000 : 1000),
			roll: num(values.roll, 100),
			...(values["cpu-prof"] ? { cpuProfDir: resolve(values["cpu-prof"]) } : {}),
		}),
	sources: () =>
		sources({
			certs: num(values.certs, full ? 5000 : 1000),
			reps: 3,
			...(values["cpu-prof"] ? { cpuProfDir: resolve(values["cpu-prof"]) } : {}),
		}),
	hotswap: () => hotswap({ certs: num(values.certs, full ? 5000 : 1000), roll: num(values.roll, 100) }),
	observe: () =>
		observe({
			sizes: values.certs ? [Number(values.certs)] : full ? [5000] : [1000],
			reps: 3,
		}),
	fleet: () =>
		fleet({
			endpoints: num(values["fleet-endpoints"], full ? 100 : 10),
			certs: num(values["fleet-certs"], full ? 1000 : 200),
			// 20 cycles: memory flat over 20 (issue 24); cycle 1 observes every endpoint in full, each later one a tenth of them (staggered).
			cycles: num(values["fleet-cycles"], 20),
			standins: num(values.standins, 2),
			...(values["cpu-prof"] ? { cpuProfDir: values["cpu-prof"] } : {}),
		}),
	"fleet-socket": () =>
		socketFleet({
			nodes: num(values["socket-nodes"], full ? 50 : 10),
			certs: num(values["socket-certs"], full ? 1000 : 500),
			noopCycles: 5,
			heapCycles: num(values["socket-cycles"], 20),
			variants: parseVariants(values["socket-variants"]),
			...(values["heap-snapshot"] ? { heapSnapshotDir: resolve(values["heap-snapshot"]) } : {}),
			...(values["cpu-prof"] ? { cpuProfDir: resolve(values["cpu-prof"]) } : {}),
		}),
	acme: () =>
		acme({
			certs: num(values["acme-certs"], full ? 50 : 20),
			parallel: 10,
			modes: ["always-valid", "http-01"],
			// The 15-minute budget of --full: the sequential peers alone would take ~8 minutes at M = 50.
			sequentialPeers: !full,
		}),
	atomicdir: () =>
		atomicdir({
			swaps: num(values.swaps, full ? 1000 : 500),
			kills: num(values.kills, full ? 100 : 30),
			...(values.dir ? { dir: values.dir } : {}),
		}),
	cluster: () => cluster({ members: 3, nodes: 3, runs: full ? 5 : 3, ttl: 5 }),
};

const resultsDir = join(fileURLToPath(new URL(".", import.meta.url)), "results");
const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`;
const started = performance.now();
let failed = 0;
for (const s of chosen) {
	try {
		const load = loadavg()[0]!.toFixed(2);
		const result = await runners[s]();
		result.notes.push(
			`Load average (1 min) before the scenario: ${load}, after: ${loadavg()[0]!.toFixed(2)} on ${cpus().length} cores.`,
		);
		printResult(result);
		// Default-size runs are <date>-<scenario>; any other size gets "-full" or "-custom" so it never overwrites them.
		const sized = Object.keys(values).some(
			(k) =>
				!["full", "help", "cpu-prof", "heap-snapshot"].includes(k) &&
				values[k as keyof typeof values] !== undefined,
		);
		const suffix = values.full ? "-full" : sized ? "-custom" : "";
		const files = writeResult(resultsDir, { ...result, scenario: `${result.scenario}${suffix}` }, command);
		console.log(`  -> ${files.join(", ")}`);
	} catch (e) {
		failed += 1;
		console.error(`\n== ${s}: FAILED: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
	}
}
console.log(
	`\nbench done in ${((performance.now() - started) / 1000).toFixed(0)} s${failed ? `, ${failed} failed` : ""}`,
);
process.exit(failed ? 1 : 0);
