import {
	chmodSync,
	existsSync,
	mkdirSync,
	readdirSync,
	readFileSync,
	readlinkSync,
	statSync,
	writeFileSync,
} from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type DesiredFiles, removeStaleStaging, syncDirectory } from "../../src/atomicdir/index.js";
import { isCertificateeError } from "../../src/errors.js";
import { versionedFiles } from "./children/versioned.js";
import { heldVersion, stagingLeftovers, tempDir, versionDirs } from "./helpers.js";

const dirs: string[] = [];
function scratch(): string {
	const d = tempDir();
	dirs.push(d);
	return d;
}
afterEach(async () => {
	for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

const mode = (p: string) => statSync(p).mode & 0o7777;

describe.each(["exchange", "symlink"] as const)("atomicdir/syncDirectory (swap: %s)", (swap) => {
	it("creates the target on the first sync, with exact modes whatever the umask", async () => {
		const target = join(scratch(), "certs");
		const result = await syncDirectory(target, versionedFiles(1), { swap });
		expect(result).toMatchObject({ status: "written", first: true, swap, problems: [] });
		expect(heldVersion(target)).toBe(1);
		expect(mode(join(target, "tls.key"))).toBe(0o600);
		expect(mode(join(target, "tls.crt"))).toBe(0o644);
		expect(mode(target)).toBe(0o755);
		expect(stagingLeftovers(join(target, ".."))).toEqual([]);
	});

	it("changes nothing on disk when the content is already there (inode, mtime, no new version)", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1), { swap });
		const before = statSync(target, { bigint: true });
		const keyBefore = statSync(join(target, "tls.key"), { bigint: true });
		const linkBefore = swap === "symlink" ? readlinkSync(join(target, "..data")) : "";
		const result = await syncDirectory(target, versionedFiles(1), { swap });
		expect(result).toMatchObject({ status: "unchanged", differences: [], problems: [] });
		const after = statSync(target, { bigint: true });
		expect(after.ino).toBe(before.ino);
		expect(after.mtimeNs).toBe(before.mtimeNs);
		expect(statSync(join(target, "tls.key"), { bigint: true }).ino).toBe(keyBefore.ino);
		if (swap === "symlink") expect(readlinkSync(join(target, "..data"))).toBe(linkBefore);
	});

	it("replaces the whole set, drops files no longer wanted and keeps one version only", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, { ...versionedFiles(1), "old.pem": { content: "x", mode: 0o644 } }, { swap });
		const result = await syncDirectory(target, versionedFiles(2), { swap });
		expect(result.status).toBe("written");
		expect(result.differences).toContain("old.pem: not wanted");
		expect(heldVersion(target)).toBe(2);
		if (swap === "symlink") expect(versionDirs(target)).toHaveLength(1);
		expect(stagingLeftovers(join(target, ".."))).toEqual([]);
	});

	it("rewrites when only a mode differs", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1), { swap });
		chmodSync(join(target, "tls.key"), 0o644);
		const result = await syncDirectory(target, versionedFiles(1), { swap });
		expect(result.differences).toEqual(["tls.key: mode 0644, want 0600"]);
		expect(mode(join(target, "tls.key"))).toBe(0o600);
	});

	it("keeps the target directory's mode across swaps, and applies a configured one", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1), { swap });
		chmodSync(target, 0o750);
		await syncDirectory(target, versionedFiles(2), { swap });
		expect(mode(target)).toBe(0o750);
		await syncDirectory(target, versionedFiles(3), { swap, dirMode: 0o710 });
		expect(mode(target)).toBe(0o710);
		expect(heldVersion(target)).toBe(3);
	});

	it.each([
		["..", "is a directory reference"],
		["a/b", "contains a path separator"],
		["", "is empty"],
		["x\0y", "contains a NUL byte"],
		["..data", "reserved"],
	])("refuses the file name %j and leaves the old content", async (name, why) => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1), { swap });
		const files: DesiredFiles = { ...versionedFiles(2), [name]: { content: "x", mode: 0o644 } };
		const error = await syncDirectory(target, files, { swap }).catch((e: unknown) => e);
		expect(isCertificateeError(error, "ATOMICDIR_BAD_NAME")).toBe(true);
		expect((error as Error).message).toContain(why);
		expect(heldVersion(target)).toBe(1);
	});

	it("fails clearly when the parent directory is missing", async () => {
		const target = join(scratch(), "missing", "certs");
		const error = await syncDirectory(target, versionedFiles(1), { swap }).catch((e: unknown) => e);
		expect(isCertificateeError(error, "ATOMICDIR_SWAP_FAILED")).toBe(true);
		expect((error as Error).message).toMatch(/parent directory .*missing/);
		expect(existsSync(join(target, ".."))).toBe(false);
	});

	it("removes stale staging left by a killed run before syncing, and reports nothing for them", async () => {
		const parent = scratch();
		const target = join(parent, "certs");
		await syncDirectory(target, versionedFiles(1), { swap });
		mkdirSync(join(parent, ".certs.atomicdir-staging-999-dead"));
		writeFileSync(join(parent, ".certs.atomicdir-staging-999-dead", "tls.key"), "half");
		expect(await removeStaleStaging(target)).toEqual([]);
		expect(stagingLeftovers(parent)).toEqual([]);
		expect(heldVersion(target)).toBe(1);
	});

	it("serialises concurrent writers in one process: the result is one writer's complete set", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1), { swap });
		const results = await Promise.all(
			[2, 3, 4, 5].map((v) => syncDirectory(target, versionedFiles(v), { swap })),
		);
		expect(results.every((r) => r.status === "written")).toBe(true);
		expect([2, 3, 4, 5]).toContain(heldVersion(target));
		expect(stagingLeftovers(join(target, ".."))).toEqual([]);
	});
});

describe("atomicdir/syncDirectory (layout changes)", () => {
	it("turns a symlink layout into a plain directory with exchange, and back", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1), { swap: "symlink" });
		await syncDirectory(target, versionedFiles(1), { swap: "exchange" });
		expect(readdirSync(target).sort()).toEqual(["ca.crt", "tls.crt", "tls.key"]);
		expect(statSync(join(target, "tls.crt")).isFile()).toBe(true);
		await syncDirectory(target, versionedFiles(2), { swap: "symlink" });
		expect(readlinkSync(join(target, "tls.crt"))).toBe("..data/tls.crt");
		expect(heldVersion(target)).toBe(2);
		expect(readFileSync(join(target, "tls.key"), "utf8")).toMatch(/^v=2\n/);
	});
});
