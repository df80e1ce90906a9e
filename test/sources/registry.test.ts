import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sourceSchema } from "../../src/config/schema.js";
import { buildSource, buildSources, sourceRegistry } from "../../src/sources/registry.js";
import { stateAt } from "../harness/state.js";

describe("sources/registry", () => {
	it("registers every kind folder under src/sources", async () => {
		const dir = join(import.meta.dirname, "../../src/sources");
		const folders = (await readdir(dir, { withFileTypes: true }))
			.filter((e) => e.isDirectory())
			.map((e) => e.name);
		expect(Object.keys(sourceRegistry).sort()).toEqual(folders.sort());
	});

	it("builds a Source for directory and an Issuer for local-ca from parsed config", async () => {
		const stateDir = await mkdtemp(join(tmpdir(), "certificatee-registry-"));
		try {
			const dirConfig = sourceSchema.parse({ name: "d", type: "directory", path: "/etc/certs" });
			expect(dirConfig).toEqual({ name: "d", type: "directory", path: "/etc/certs", debounce: 100 });
			const built = await buildSource(dirConfig, { store: stateAt(stateDir) });
			expect(built.role === "source" && built.source.name).toBe("d");
			const caConfig = sourceSchema.parse({ name: "c", type: "local-ca", lifetime: "90s" });
			expect(caConfig).toMatchObject({
				type: "local-ca",
				lifetime: 90_000,
				ca_common_name: "certificatee local CA",
			});
			const issuer = await buildSource(caConfig, { store: stateAt(stateDir) });
			expect(issuer.role === "issuer" && issuer.issuer.name).toBe("c");
			const all = await buildSources([dirConfig, caConfig], { store: stateAt(stateDir) });
			expect(all.sources.map((s) => s.name)).toEqual(["d"]);
			expect([...all.issuers.keys()]).toEqual(["c"]);
		} finally {
			await rm(stateDir, { recursive: true, force: true });
		}
	});

	it("rejects unknown keys and bad durations in a kind's options, naming the field", () => {
		const extra = sourceSchema.safeParse({ name: "x", type: "directory", path: "/p", colour: "red" });
		expect(JSON.stringify(extra.error?.issues)).toContain("colour");
		const bad = sourceSchema.safeParse({ name: "x", type: "local-ca", lifetime: "soon" });
		expect(bad.error?.issues[0]?.path).toEqual(["lifetime"]);
	});
});
