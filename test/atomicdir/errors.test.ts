/**
 * Failures that must be clear and leave the old content intact: read-only parent, mount point,
 * filesystems without RENAME_EXCHANGE, a second writer. Uses real mounts where this process may mount
 * (root with CAP_SYS_ADMIN); otherwise the same errno is injected at the native binding.
 */
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, readdirSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type NativeBinding, probeExchange, SyscallError, syncDirectory } from "../../src/atomicdir/index.js";
import { lockFile } from "../../src/atomicdir/lock.js";
import { loadNativeBinding } from "../../src/atomicdir/renameat2.js";
import { CertificateeError } from "../../src/errors.js";
import { versionedFiles } from "./children/versioned.js";
import {
	type Child,
	fastTempDir,
	heldVersion,
	stagingLeftovers,
	startChild,
	tempDir,
	tryMount,
	unmount,
} from "./helpers.js";

const cleanup: { mounts: string[]; dirs: string[]; children: Child[]; immutable: string[] } = {
	mounts: [],
	dirs: [],
	children: [],
	immutable: [],
};
afterEach(async () => {
	for (const c of cleanup.children.splice(0)) c.kill();
	for (const f of cleanup.immutable.splice(0)) execFileSync("chattr", ["-i", f]);
	for (const m of cleanup.mounts.splice(0).reverse()) unmount(m);
	for (const d of cleanup.dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function scratch(): string {
	const d = tempDir();
	cleanup.dirs.push(d);
	return d;
}

function fastScratch(): string {
	const d = fastTempDir();
	cleanup.dirs.push(d);
	return d;
}

function mount(args: string[], dir: string): boolean {
	const ok = tryMount(args, dir);
	if (ok) cleanup.mounts.push(dir);
	return ok;
}

async function realBinding(): Promise<NativeBinding> {
	const loaded = await loadNativeBinding();
	if (!loaded.ok) throw new Error(loaded.reason);
	return loaded.binding;
}

/** The real binding, except that exchange fails with `code` (a filesystem this machine can't mount). */
async function failingExchange(code: string, errno: number): Promise<NativeBinding> {
	const real = await realBinding();
	return {
		...real,
		exchange: (_dir, a, b) => {
			throw new SyscallError("renameat2", code, errno, a, b);
		},
	};
}

async function errorOf(p: Promise<unknown>): Promise<CertificateeError> {
	const e = await p.then(
		() => undefined,
		(x: unknown) => x,
	);
	expect(e).toBeInstanceOf(CertificateeError);
	return e as CertificateeError;
}

describe("atomicdir errors", () => {
	it("a read-only parent gives a clear error and keeps the old content", async () => {
		const parent = join(scratch(), "ro");
		const mounted = mount(["-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs"], parent);
		const target = join(parent, "certs");
		await syncDirectory(target, versionedFiles(1));
		let binding: NativeBinding | undefined;
		if (mounted) execFileSync("mount", ["-o", "remount,ro", parent]);
		else if (process.getuid?.() !== 0) execFileSync("chmod", ["0555", parent]);
		else binding = await failingExchange("EROFS", 30);
		const error = await errorOf(syncDirectory(target, versionedFiles(2), { binding }));
		expect(error.code).toBe("ATOMICDIR_SWAP_FAILED");
		expect(error.message).toMatch(/EROFS|EACCES/);
		expect(error.message).toContain("old content kept");
		expect(error.hint).toMatch(/read-only|write access/);
		expect(heldVersion(target)).toBe(1);
		if (mounted) execFileSync("mount", ["-o", "remount,rw", parent]);
		else execFileSync("chmod", ["0755", parent]);
		expect(stagingLeftovers(parent)).toEqual([]);
	});

	it("a target that is a mount point is refused (EBUSY) with the option to choose; exchange-or-symlink works there", async () => {
		const target = join(scratch(), "certs");
		const mounted = mount(["-t", "tmpfs", "-o", "size=4m", "tmpfs"], target);
		const binding = mounted ? undefined : await failingExchange("EBUSY", 16);
		if (mounted) await syncDirectory(target, versionedFiles(1), { swap: "symlink" });
		else await syncDirectory(target, versionedFiles(1));
		const error = await errorOf(syncDirectory(target, versionedFiles(2), { binding }));
		expect(error.code).toBe("ATOMICDIR_UNSUPPORTED");
		expect(error.message).toContain("mount point (EBUSY)");
		expect(error.hint).toContain("swap: symlink");
		expect(heldVersion(target)).toBe(1);
		const result = await syncDirectory(target, versionedFiles(3), { swap: "exchange-or-symlink", binding });
		expect(result).toMatchObject({ status: "written", swap: "symlink" });
		expect(heldVersion(target)).toBe(3);
		expect(stagingLeftovers(join(target, ".."))).toEqual([]);
	});

	it("a target in an overlay lower layer (EXDEV) is refused with the filesystem problem named", async () => {
		const base = scratch();
		const lower = join(base, "lower");
		const target = join(base, "merged", "certs");
		mkdirSync(join(lower, "certs"), { recursive: true });
		for (const d of ["upper", "work", "merged"]) mkdirSync(join(base, d));
		for (const [name, file] of Object.entries(versionedFiles(1))) {
			writeFileSync(join(lower, "certs", name), file.content, { mode: file.mode });
		}
		const mounted = mount(
			["-t", "overlay", "overlay", "-o", `lowerdir=${lower},upperdir=${base}/upper,workdir=${base}/work`],
			join(base, "merged"),
		);
		const binding = mounted ? undefined : await failingExchange("EXDEV", 18);
		if (!mounted) await syncDirectory(target, versionedFiles(1));
		const error = await errorOf(syncDirectory(target, versionedFiles(2), { binding }));
		expect(error.code).toBe("ATOMICDIR_UNSUPPORTED");
		expect(error.message).toContain("overlay lower layer");
		expect(error.message).toContain("(EXDEV)");
		expect(error.hint).toContain("swap: symlink");
		expect(heldVersion(target)).toBe(1);
		expect(stagingLeftovers(join(target, ".."))).toEqual([]);
	});

	it("a filesystem without RENAME_EXCHANGE (EINVAL, e.g. FUSE) is refused, never written file by file", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1));
		const binding = await failingExchange("EINVAL", 22);
		const before = statSync(join(target, "tls.crt")).ino;
		const error = await errorOf(syncDirectory(target, versionedFiles(2), { binding }));
		expect(error.code).toBe("ATOMICDIR_UNSUPPORTED");
		expect(error.message).toContain("does not support RENAME_EXCHANGE");
		expect(error.message).toContain("(EINVAL)");
		expect(statSync(join(target, "tls.crt")).ino).toBe(before);
		expect(heldVersion(target)).toBe(1);
		const fallback = await syncDirectory(target, versionedFiles(2), { binding, swap: "exchange-or-symlink" });
		expect(fallback.swap).toBe("symlink");
		expect(heldVersion(target)).toBe(2);
	});

	it("probeExchange says whether RENAME_EXCHANGE works in a directory, and leaves nothing behind", async () => {
		const dir = scratch();
		expect(await probeExchange(dir)).toEqual({ supported: true });
		const refused = await probeExchange(dir, await failingExchange("EINVAL", 22));
		expect(refused).toMatchObject({ supported: false, code: "EINVAL" });
		expect(readdirSync(dir)).toEqual([]);
		// exchange-or-symlink creates a new target in the layout the probe allows
		const target = join(dir, "certs");
		const result = await syncDirectory(target, versionedFiles(1), {
			swap: "exchange-or-symlink",
			binding: await failingExchange("EINVAL", 22),
		});
		expect(result).toMatchObject({ swap: "symlink", first: true });
		expect(readlinkSync(join(target, "tls.crt"))).toBe("..data/tls.crt");
	});

	it("a target that is a file is refused", async () => {
		const target = join(scratch(), "certs");
		writeFileSync(target, "not a dir");
		const error = await errorOf(syncDirectory(target, versionedFiles(1)));
		expect(error.code).toBe("ATOMICDIR_SWAP_FAILED");
		expect(error.message).toContain("not a directory");
	});

	it("an old version that cannot be removed is reported to the caller, with the new content live", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1));
		const stuck = join(target, "tls.crt");
		const asRoot = process.getuid?.() === 0;
		if (asRoot) execFileSync("chattr", ["+i", stuck]);
		else execFileSync("chmod", ["0555", target]);
		const result = await syncDirectory(target, versionedFiles(2));
		const [left] = stagingLeftovers(join(target, ".."));
		if (asRoot && left !== undefined) cleanup.immutable.push(join(target, "..", left, "tls.crt"));
		expect(result.status).toBe("written");
		expect(heldVersion(target)).toBe(2);
		expect(result.problems.map((p) => p.code)).toEqual(["ATOMICDIR_CLEANUP_FAILED"]);
		expect(result.problems[0]!.message).toMatch(/could not remove .*atomicdir-staging/);
		// Release the leftover so the next start can remove it.
		for (const f of cleanup.immutable.splice(0)) execFileSync("chattr", ["-i", f]);
		if (!asRoot) execFileSync("chmod", ["0755", join(target, "..", left!)]);
		const next = await syncDirectory(target, versionedFiles(2));
		expect(next).toMatchObject({ status: "unchanged", problems: [] });
		expect(stagingLeftovers(join(target, ".."))).toEqual([]);
	});

	it("a second writer waits for the lock and fails as retryable ATOMICDIR_LOCKED after the timeout", async () => {
		const target = join(scratch(), "certs");
		await syncDirectory(target, versionedFiles(1));
		const parent = openSync(join(target, ".."), "r");
		const held = await lockFile(parent, ".certs.lock", join(target, "..", ".certs.lock"), target, 1000);
		try {
			const error = await errorOf(syncDirectory(target, versionedFiles(2), { lockTimeoutMs: 200 }));
			expect(error.code).toBe("ATOMICDIR_LOCKED");
			expect(error.retryable).toBe(true);
		} finally {
			await held.release();
			closeSync(parent);
		}
		expect(heldVersion(target)).toBe(1);
		await syncDirectory(target, versionedFiles(2));
		expect(heldVersion(target)).toBe(2);
	});

	it("two writer processes on one target: each sync is whole, the final state is one writer's set", async () => {
		const target = join(fastScratch(), "certs");
		await syncDirectory(target, versionedFiles(1));
		const writers = await Promise.all([
			startChild("writer", [target, "exchange", "100", "300", "1"]),
			startChild("writer", [target, "exchange", "1000", "1200", "1"]),
		]);
		cleanup.children.push(...writers);
		const exits = await Promise.all(writers.map((w) => w.exited));
		for (const exit of exits) expect(exit).toMatchObject({ code: 0, stderr: "" });
		expect([300, 1200]).toContain(heldVersion(target));
		expect(stagingLeftovers(join(target, ".."))).toEqual([]);
	});

	it.each(["exchange", "symlink"] as const)(
		"%s: owner and modes are applied as root (directory and files), and a second sync is a no-op",
		async (swap) => {
			if (process.getuid?.() !== 0) {
				const error = await errorOf(
					syncDirectory(join(scratch(), "certs"), versionedFiles(1), { swap, owner: { uid: 0, gid: 0 } }),
				);
				expect(error.code).toBe("ATOMICDIR_SWAP_FAILED");
				return;
			}
			const target = join(scratch(), "certs");
			const owner = { uid: 4242, gid: 4343 };
			await syncDirectory(target, versionedFiles(1), { swap, owner, dirMode: 0o750 });
			for (const p of [target, join(target, "tls.key"), join(target, "tls.crt")]) {
				expect(statSync(p)).toMatchObject({ uid: 4242, gid: 4343 });
			}
			expect(statSync(target).mode & 0o7777).toBe(0o750);
			expect(statSync(join(target, "tls.key")).mode & 0o7777).toBe(0o600);
			expect((await syncDirectory(target, versionedFiles(1), { swap, owner, dirMode: 0o750 })).status).toBe(
				"unchanged",
			);
			// A root sync without a configured owner keeps the directory's owner across the swap.
			await syncDirectory(target, versionedFiles(2), { swap, dirMode: 0o750 });
			expect(statSync(target)).toMatchObject({ uid: 4242, gid: 4343 });
			// A new owner converges: one write, then no-ops.
			const other = { uid: 5151, gid: 5252 };
			expect((await syncDirectory(target, versionedFiles(2), { swap, owner: other })).status).toBe("written");
			expect(statSync(target)).toMatchObject({ uid: 5151, gid: 5252 });
			expect((await syncDirectory(target, versionedFiles(2), { swap, owner: other })).status).toBe(
				"unchanged",
			);
		},
	);
});
