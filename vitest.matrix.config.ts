/**
 * The HAProxy version matrix (docs/testing.md): one vitest project per shared HAProxy build, each running
 * the test files that start HAProxy (all of them on 3.4 and 3.2, the core subset on 3.0 and 2.8) with
 * HAPROXY_BIN and PATH pointing at that build. `npx vitest run --config vitest.matrix.config.ts`
 * (scripts/test-matrix.sh); `--project haproxy-3.2.0` runs one version.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { defineConfig } from "vitest/config";
import { CORE, haproxyTestFiles, MATRIX, matrixDir } from "./test/harness/matrix.js";
import base from "./vitest.config.js";

const root = import.meta.dirname;
const dir = matrixDir(root);
const files = haproxyTestFiles(root);
for (const file of CORE) {
	if (!files.includes(file))
		throw new Error(`vitest.matrix.config.ts: core test ${file} starts no HAProxy (or is gone)`);
}

// The projects inherit everything but `include` (merged, it would add back every file).
const { include: _all, ...shared } = base.test ?? {};

export default defineConfig({
	test: {
		...shared,
		projects: MATRIX.map(({ version, tier }) => {
			const bin = join(dir, version, "haproxy");
			const said = execFileSync(bin, ["-v"], { encoding: "utf8" });
			if (!said.startsWith(`HAProxy version ${version}`)) {
				throw new Error(`${bin} -v says "${said.split("\n")[0]}", not HAProxy ${version}`);
			}
			return {
				extends: true as const,
				test: {
					name: `haproxy-${version}`,
					include: tier === "all" ? files : [...CORE],
					// PATH too: `certificatee demo` starts the first haproxy on PATH.
					env: { HAPROXY_BIN: bin, PATH: `${join(dir, version)}:${process.env.PATH ?? ""}` },
				},
			};
		}),
	},
});
