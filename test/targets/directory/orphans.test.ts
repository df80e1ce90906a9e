import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { orphanStaging } from "../../../src/targets/directory/orphans.js";
import { directoryTargetSchema } from "../../../src/targets/directory/schema.js";

const dirs: string[] = [];
afterEach(() => {
	for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("targets/directory orphan staging", () => {
	it("reports staging whose set or file no configured target writes, and removes nothing", async () => {
		const p = mkdtempSync(join(tmpdir(), "certificatee-orphans-"));
		dirs.push(p);
		const target = (name: string, path: string, extra: Record<string, unknown> = {}) =>
			directoryTargetSchema.parse({ name, type: "directory", path, ...extra });
		const configs = [
			target("one", join(p, "one"), { certificates: ["x"] }),
			target("multi", join(p, "multi")),
			target("pem", join(p, "pem"), { layout: "haproxy-pem", certificates: ["x"] }),
		];
		for (const d of ["one", "multi", "pem"]) mkdirSync(join(p, d));
		const staging = {
			configured: join(p, ".one.atomicdir-staging-1-abc"),
			targetGone: join(p, ".gone.atomicdir-staging-2-abc"),
			setConfigured: join(p, "multi", ".y.atomicdir-staging-3-abc"),
			setGone: join(p, "multi", ".z.atomicdir-staging-4-abc"),
			fileConfigured: join(p, "pem", ".x.pem.atomicdir-tmp-5-abc"),
			fileGone: join(p, "pem", ".old.pem.atomicdir-tmp-6-abc"),
		};
		for (const path of Object.values(staging)) {
			if (path.includes("staging")) mkdirSync(path);
			else writeFileSync(path, "key material");
		}
		writeFileSync(join(p, ".one.lock"), "");

		expect(await orphanStaging(configs, ["x", "y"])).toEqual(
			[staging.targetGone, staging.setGone, staging.fileGone].sort(),
		);
		for (const path of Object.values(staging)) expect(existsSync(path)).toBe(true);
	});
});
