import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CORE, haproxyTestFiles, MATRIX, matrixDir } from "./matrix.js";

const dirs: string[] = [];
afterEach(() => {
	for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("the HAProxy version matrix (docs/testing.md)", () => {
	it("finds the test files that start HAProxy from their imports, without the ones that pick their own versions", () => {
		const files = haproxyTestFiles(process.cwd());
		expect(files).toEqual(
			expect.arrayContaining([...CORE, "test/targets/haproxy-runtime/died-mid-observation.test.ts"]),
		);
		// Pure: no HAProxy.
		expect(files).not.toContain("test/targets/haproxy-runtime/master.test.ts");
		expect(files).not.toContain("test/harness/matrix.test.ts");
		// Runs 3.2 and 3.4 itself (haproxyBuilds).
		expect(files).not.toContain("test/targets/haproxy-runtime/layout-crt-store.test.ts");
	});

	it("finds shared/haproxy beside the project or a parent, and names what is missing", () => {
		const top = mkdtempSync(join(tmpdir(), "certificatee-matrix-"));
		dirs.push(top);
		const project = join(top, "wt", "clone");
		mkdirSync(project, { recursive: true });
		const env = {};
		expect(() => matrixDir(project, env)).toThrow(
			/the HAProxy version matrix is not here: no shared\/haproxy beside/,
		);
		const shared = join(top, "shared", "haproxy");
		for (const { version } of MATRIX.slice(1)) {
			mkdirSync(join(shared, version), { recursive: true });
			writeFileSync(join(shared, version, "haproxy"), "");
		}
		expect(() => matrixDir(project, env)).toThrow(`lacks ${join(shared, MATRIX[0]!.version, "haproxy")}`);
		mkdirSync(join(shared, MATRIX[0]!.version));
		writeFileSync(join(shared, MATRIX[0]!.version, "haproxy"), "");
		expect(matrixDir(project, env)).toBe(shared);
		expect(() => matrixDir(project, { HAPROXY_MATRIX_DIR: join(top, "nowhere") })).toThrow(
			/HAPROXY_MATRIX_DIR=.*nowhere: no such directory/,
		);
	});
});
