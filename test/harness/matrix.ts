/**
 * The HAProxy version matrix CI runs (docs/testing.md): which test files start HAProxy, and where the
 * shared HAProxy builds are. Read by vitest.matrix.config.ts; pure apart from reading files.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/** The test files run on every version of the matrix. */
export type Tier = "all" | "core";

/** Each shared version and what of the HAProxy test files runs on it (docs/testing.md says why). */
export const MATRIX: ReadonlyArray<{ version: string; tier: Tier }> = [
	{ version: "3.4.0", tier: "all" },
	{ version: "3.2.0", tier: "all" },
	{ version: "3.0.0", tier: "core" },
	{ version: "2.8.0", tier: "core" },
];

/**
 * The core subset for the versions between the LTS lines tested in full: the runtime client and its
 * version-dependent answers, reloads through the master CLI, a reload told from the process tree (up to 3.0
 * the master loads the files before it forks), both targets end to end, the reload-safety
 * invariant, `validate --online`, and observing at scale.
 */
export const CORE: readonly string[] = [
	"test/targets/haproxy-runtime/socket.test.ts",
	"test/targets/haproxy-runtime/endpoint.test.ts",
	"test/targets/haproxy-runtime/reload.test.ts",
	"test/targets/haproxy-runtime/workers.test.ts",
	"test/targets/haproxy-runtime/observe-scale.test.ts",
	"test/targets/haproxy/engine/runtime-target.test.ts",
	"test/targets/haproxy/engine/dataplane-target.test.ts",
	"test/harness/invariant.test.ts",
	"test/cli/validate-online.test.ts",
];

const HARNESS = "test/harness/haproxy.ts";
/** A file that picks its own HAProxy versions (haproxyBuilds) runs them all in the suite already. */
const OWN_VERSIONS = "test/harness/haproxy-builds.ts";

function walk(dir: string): string[] {
	return readdirSync(dir).flatMap((name) => {
		const path = join(dir, name);
		return statSync(path).isDirectory() ? walk(path) : [path];
	});
}

/** The project's files a TypeScript module imports by relative path (`./x.js` is `./x.ts`). */
function localImports(file: string): string[] {
	const text = readFileSync(file, "utf8");
	const out: string[] = [];
	for (const m of text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)) {
		const base = resolve(dirname(file), m[1]!);
		const found = [base.replace(/\.js$/, ".ts"), `${base}.ts`, join(base, "index.ts")].find(
			(p) => existsSync(p) && statSync(p).isFile(),
		);
		if (found) out.push(found);
	}
	return out;
}

/**
 * Every test file under `root/test` that starts HAProxy: its imports reach test/harness/haproxy.ts (which
 * every helper that starts one goes through: startHaproxy, the Data Plane API double, the invariant),
 * except those that run their own list of versions (haproxy-builds.ts). Sorted, relative to `root`.
 */
export function haproxyTestFiles(root: string): string[] {
	const reaches = (target: string) => {
		const memo = new Map<string, boolean>();
		const visit = (file: string): boolean => {
			const known = memo.get(file);
			if (known !== undefined) return known;
			memo.set(file, false); // cycles: not through this path
			const result = file === target || localImports(file).some(visit);
			memo.set(file, result);
			return result;
		};
		return visit;
	};
	const startsHaproxy = reaches(resolve(root, HARNESS));
	const ownVersions = reaches(resolve(root, OWN_VERSIONS));
	return walk(resolve(root, "test"))
		.filter((f) => f.endsWith(".test.ts") && startsHaproxy(f) && !ownVersions(f))
		.map((f) => relative(root, f))
		.sort();
}

/**
 * The directory holding `<version>/haproxy` for every version of the matrix: `HAPROXY_MATRIX_DIR`, else the
 * first `shared/haproxy` beside `root` or one of its parents (CI clones the project beside a copy of shared/).
 * Throws naming every place looked at and what is missing.
 */
export function matrixDir(root: string, env: NodeJS.ProcessEnv = process.env): string {
	const candidates: string[] = [];
	if (env.HAPROXY_MATRIX_DIR) candidates.push(resolve(root, env.HAPROXY_MATRIX_DIR));
	else
		for (let dir = resolve(root); ; dir = dirname(dir)) {
			candidates.push(join(dirname(dir), "shared", "haproxy"));
			if (dirname(dir) === dir) break;
		}
	const missing = (dir: string) =>
		MATRIX.map((m) => join(dir, m.version, "haproxy")).filter((b) => !existsSync(b));
	const found = candidates.find((dir) => missing(dir).length === 0);
	if (found !== undefined) return found;
	const partial = candidates.find((dir) => existsSync(dir));
	throw new Error(
		partial === undefined && env.HAPROXY_MATRIX_DIR
			? `HAPROXY_MATRIX_DIR=${env.HAPROXY_MATRIX_DIR}: no such directory; it must hold ${MATRIX.map((m) => `${m.version}/haproxy`).join(", ")}`
			: partial === undefined
				? `the HAProxy version matrix is not here: no shared/haproxy beside ${root} or its parents (looked in ${candidates.join(", ")}); set HAPROXY_MATRIX_DIR to the directory holding ${MATRIX.map((m) => `${m.version}/haproxy`).join(", ")}`
				: `the HAProxy version matrix in ${partial} lacks ${missing(partial).join(", ")}: copy the builds there (see its README) or set HAPROXY_MATRIX_DIR`,
	);
}
