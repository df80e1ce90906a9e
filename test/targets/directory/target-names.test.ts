/**
 * Issue 25, finding 8: a directory target's name is one path segment under state_dir (its pending on_change
 * runs): `../../t8-escaped` created a directory outside state_dir. It is refused by the configuration, and the
 * store refuses it again whoever calls it.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openFileStore } from "../../../src/store/file-store.js";
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
		const store = await openFileStore(state);
		try {
			expect(() => pendingHooksIn(store, "../../t8-escaped", state)).toThrow(
				/cannot name a file under the state directory/,
			);
			expect(existsSync(join(root, "t8-escaped"))).toBe(false);
			expect(existsSync(join(state, "..", "..", "t8-escaped"))).toBe(false);
			const fine = pendingHooksIn(store, "web", state);
			await fine.mark("api.example");
			expect(readdirSync(join(state, "hooks", "web"))).toEqual(["api.example.json"]);
			await expect(fine.mark("../x")).rejects.toMatchObject({ code: "CONFIG_INVALID" });
		} finally {
			store.close();
		}
	});

	it("pending hooks are records of the local state store: kept across a restart, cleared by success; an empty file an older version left still counts until then", async () => {
		const state = join(root, "state");
		let store = await openFileStore(state);
		const hooks = () => pendingHooksIn(store, "web", state);
		expect(await hooks().has("shop")).toBe(false);
		await hooks().mark("shop");
		expect((await store.get("hooks/web/shop"))?.value).toEqual({ pending: true });
		store.close();
		store = await openFileStore(state);
		try {
			expect(await hooks().has("shop"), "remembered across a restart").toBe(true);
			await hooks().clear("shop");
			expect(await hooks().has("shop")).toBe(false);
			expect((await store.get("hooks/web/shop"))?.value).toEqual({ pending: false });
			// Clearing what is not pending writes nothing.
			await hooks().clear("other");
			expect(await store.get("hooks/web/other")).toBeUndefined();

			// The layout before the store: an empty file per pending hook.
			mkdirSync(join(state, "hooks", "web"), { recursive: true });
			writeFileSync(join(state, "hooks", "web", "legacy"), "", { mode: 0o600 });
			expect(await hooks().has("legacy")).toBe(true);
			await hooks().clear("legacy");
			expect(existsSync(join(state, "hooks", "web", "legacy"))).toBe(false);
			expect(await hooks().has("legacy")).toBe(false);
		} finally {
			store.close();
		}
	});
});
