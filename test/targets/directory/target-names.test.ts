/**
 * Issue 25, finding 8: a directory target's name is one path segment under state_dir (its pending on_change
 * runs): `../../t8-escaped` created a directory outside state_dir. It is refused by the configuration, and the
 * store refuses it again whoever calls it.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { directoryTargetSchema } from "../../../src/targets/directory/index.js";
import { pendingHooksIn } from "../../../src/targets/directory/pending-hooks.js";

const root = mkdtempSync(join(tmpdir(), "certificatee-target-names-"));
afterEach(() => rmSync(join(root, "state"), { recursive: true, force: true }));

describe("directory target names", () => {
	it.each(["../../t8-escaped", "a/b", ".hidden", "a b", ""])("the configuration refuses %j", (name) => {
		const parsed = directoryTargetSchema.safeParse({ name, type: "directory", path: "/srv/certs" });
		expect(parsed.success).toBe(false);
		expect(JSON.stringify(parsed.error?.issues)).toContain("letters, digits");
	});

	it("the pending-hook store refuses a name that would leave state_dir, and writes nothing", async () => {
		const state = join(root, "state");
		expect(() => pendingHooksIn(state, "../../t8-escaped")).toThrow(
			/cannot name a file under the state directory/,
		);
		expect(existsSync(join(root, "t8-escaped"))).toBe(false);
		expect(existsSync(join(state, "..", "..", "t8-escaped"))).toBe(false);
		const fine = pendingHooksIn(state, "web");
		await fine.mark("api.example");
		expect(readdirSync(join(state, "hooks", "web"))).toEqual(["api.example"]);
		await expect(fine.mark("../x")).rejects.toMatchObject({ code: "CONFIG_INVALID" });
	});
});
