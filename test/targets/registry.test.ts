import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { targetSchema } from "../../src/config/schema.js";
import { buildTarget, targetRegistry } from "../../src/targets/registry.js";

const SRC = join(import.meta.dirname, "../../src/targets");
/** Folders under src/targets that are not a kind: helpers the kinds share. */
const SHARED = ["haproxy"];

describe("targets/registry", () => {
	it("registers every kind folder under src/targets (a folder with a schema.ts), and every folder is a kind or shared", async () => {
		const folders = (await readdir(SRC, { withFileTypes: true }))
			.filter((e) => e.isDirectory())
			.map((e) => e.name);
		const kinds = folders.filter((f) => existsSync(join(SRC, f, "schema.ts")));
		expect(Object.keys(targetRegistry).sort()).toEqual(kinds.sort());
		expect(folders.filter((f) => !kinds.includes(f)).sort()).toEqual(SHARED);
		for (const kind of kinds)
			expect(existsSync(join(SRC, kind, "target.ts")), `${kind}/target.ts`).toBe(true);
	});

	it("builds every kind from parsed config as a BuiltTarget named by its config, without connecting", async () => {
		const configs = [
			targetSchema.parse({
				name: "lb1",
				type: "haproxy-runtime",
				socket: "/run/haproxy/admin.sock",
				crt_dir: "/etc/haproxy/certs",
			}),
			targetSchema.parse({
				name: "fra",
				type: "haproxy-dataplane",
				storage_dir: "/etc/haproxy/ssl",
				endpoints: [{ name: "fra1", url: "http://127.0.0.1:1", username: "admin", password: "secret" }],
			}),
			targetSchema.parse({ name: "files", type: "directory", path: "/srv/tls" }),
		];
		expect(configs.map((c) => c.type).sort()).toEqual(Object.keys(targetRegistry).sort());
		for (const config of configs) {
			const built = buildTarget(config, { now: () => new Date() });
			try {
				expect([built.name, built.kind, typeof built.run]).toEqual([config.name, config.type, "function"]);
			} finally {
				await built.close();
			}
		}
	});

	it("a built directory target runs a cycle like every other kind: one endpoint report, nothing written by plan", async () => {
		const dir = await mkdtemp(join(tmpdir(), "certificatee-target-registry-"));
		try {
			const path = join(dir, "out");
			const built = buildTarget(targetSchema.parse({ name: "files", type: "directory", path }), {
				now: () => new Date(),
			});
			const report = await built.run([], "plan", new AbortController().signal);
			expect(report).toMatchObject({
				target: "files",
				kind: "directory",
				endpoints: [{ endpoint: path, ok: true, steps: [] }],
			});
			expect(existsSync(path)).toBe(false);
		} finally {
			await rm(dir, { recursive: true, force: true });
		}
	});

	it("rejects unknown keys in a kind's options and an unknown type, naming the field", () => {
		const extra = targetSchema.safeParse({ name: "x", type: "directory", path: "/srv/tls", colour: "red" });
		expect(JSON.stringify(extra.error?.issues)).toContain("colour");
		const unknown = targetSchema.safeParse({ name: "x", type: "nginx" });
		expect(unknown.error?.issues[0]?.path).toEqual(["type"]);
	});
});
