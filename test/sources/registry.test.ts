import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildSource, sourceConfigSchema, sourceKinds } from "../../src/sources/registry.js";

describe("sources/registry", () => {
	it("registers every kind folder under src/sources", async () => {
		const dir = join(import.meta.dirname, "../../src/sources");
		const folders = (await readdir(dir, { withFileTypes: true }))
			.filter((e) => e.isDirectory())
			.map((e) => e.name);
		expect(Object.keys(sourceKinds).sort()).toEqual(folders.sort());
	});

	it("parses each kind with its own strict schema and builds it", async () => {
		const stateDir = await mkdtemp(join(tmpdir(), "certificatee-registry-"));
		try {
			const dirConfig = sourceConfigSchema.parse({ name: "d", type: "directory", path: "/etc/certs" });
			expect(dirConfig).toEqual({ name: "d", type: "directory", path: "/etc/certs", debounce: 500 });
			expect(buildSource(dirConfig, { stateDir }).role).toBe("source");
			const caConfig = sourceConfigSchema.parse({ name: "c", type: "local-ca", lifetime: "90s" });
			expect(caConfig).toMatchObject({ type: "local-ca", lifetime: 90_000 });
			expect(buildSource(caConfig, { stateDir }).role).toBe("issuer");
		} finally {
			await rm(stateDir, { recursive: true, force: true });
		}
	});

	it("rejects unknown kinds, unknown keys and bad durations, naming the field", () => {
		expect(sourceConfigSchema.safeParse({ name: "x", type: "ftp" }).success).toBe(false);
		const extra = sourceConfigSchema.safeParse({ name: "x", type: "directory", path: "/p", colour: "red" });
		expect(extra.success).toBe(false);
		expect(JSON.stringify(extra.error?.issues)).toContain("colour");
		const bad = sourceConfigSchema.safeParse({ name: "x", type: "local-ca", lifetime: "soon" });
		expect(bad.error?.issues[0]?.path).toEqual(["lifetime"]);
	});
});
