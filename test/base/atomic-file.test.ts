/**
 * base/atomic-file.ts on real files: a writer SIGKILLed mid-write leaves the old file or a new one, never a
 * part; the sweep removes its temp files (this version's names and older versions'), never another tool's,
 * one being written, or one younger than minAgeMs.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
	isTempName,
	sweepTempFiles,
	tempOwner,
	writeFileAtomic,
	writeTempFile,
	writing,
} from "../../src/base/atomic-file.js";

const CHILD = join(import.meta.dirname, "atomic-file-child.ts");
let dir: string;
beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-atomic-file-"));
});
afterEach(async () => {
	await rm(dir, { recursive: true, force: true });
});

/**
 * Runs the writer until it has put its first version in place, lets it write on for `afterMs`, then SIGKILLs it.
 * Waiting for a whole version (not for the child's start) keeps the test's last check true on a slow machine:
 * killed during its first write, a writer leaves only the old file, which is right but proves no replacement
 * (beside three CI runs and a CPU hog, the first 1 MB write took longer than the 20-100 ms, and the test failed).
 */
async function killWriter(path: string, afterMs: number): Promise<void> {
	const child = spawn(process.execPath, ["--import", "tsx", CHILD, path], {
		stdio: ["ignore", "pipe", "pipe"],
	});
	const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_c, s) => resolve(s)));
	await new Promise<void>((resolve, reject) => {
		let out = "";
		child.stdout.on("data", (d: Buffer) => {
			out += d.toString();
			if (/^wrote \d+$/m.test(out)) resolve();
		});
		child.once("exit", (code) => reject(new Error(`atomic-file child exited early (${code})`)));
	});
	await new Promise((r) => setTimeout(r, afterMs));
	child.kill("SIGKILL");
	expect(await exited).toBe("SIGKILL");
}

/** The file's version: whole JSON whose checksum matches, or the test fails. */
async function versionOf(path: string): Promise<number> {
	const { n, payload, sum } = JSON.parse(await readFile(path, "utf8")) as {
		n: number;
		payload: string;
		sum: string;
	};
	expect(createHash("sha256").update(payload).digest("hex")).toBe(sum);
	return n;
}

describe("base/atomic-file", () => {
	it("a writer SIGKILLed mid-write leaves the old file or a new one, never a part; the sweep removes its temp files", async () => {
		const path = join(dir, "state.json");
		await writeFile(path, JSON.stringify({ n: 0, payload: "", sum: createHash("sha256").digest("hex") }));
		let temps = 0;
		let kills = 0;
		// Until a kill lands between a temp file's creation and its rename (most do, at ~1 MB), 40 at most.
		while (temps === 0 && kills < 40) {
			await killWriter(path, 20 + Math.floor(Math.random() * 80));
			kills += 1;
			expect(await versionOf(path)).toBeGreaterThanOrEqual(0);
			const left = (await readdir(dir)).filter(isTempName);
			for (const name of left) expect(tempOwner(name)).toBe("state.json");
			temps = left.length;
			if (temps > 0) expect(await sweepTempFiles(dir)).toEqual(left.map((n) => join(dir, n)));
		}
		expect(temps, `no kill out of ${kills} landed between write and rename`).toBeGreaterThan(0);
		expect(await readdir(dir)).toEqual(["state.json"]);
		expect(await versionOf(path)).toBeGreaterThan(0);
	});

	it("the mode is 0600 unless said, and exact when said", async () => {
		await writeFileAtomic(join(dir, "key.pem"), "secret");
		expect((await stat(join(dir, "key.pem"))).mode & 0o777).toBe(0o600);
		await writeFileAtomic(join(dir, "group.pem"), "cert", { mode: 0o640 });
		expect((await stat(join(dir, "group.pem"))).mode & 0o777).toBe(0o640);
		await expect(writeFileAtomic(join(dir, "missing", "a.json"), "{}")).rejects.toMatchObject({
			code: "ENOENT",
		});
		await writeFileAtomic(join(dir, "made", "a.json"), "{}", { mkdir: true });
		expect((await stat(join(dir, "made"))).mode & 0o777).toBe(0o700);
		expect(await readdir(dir)).toEqual(expect.not.arrayContaining([expect.stringMatching(/\.tmp$/)]));
	});

	it("sweeps this version's and older versions' temp names, never another tool's, one in flight or a young one", async () => {
		const now = new Date();
		const old = new Date(now.getTime() - 60_000);
		const ours = [
			".a.pem.certificatee-0123456789ab.tmp", // this version
			".a.pem.certificatee-pair-0123456789ab.tmp", // the pair writer before
			".tmp-renewal.json.4242.deadbeef", // the state store before
			".a.pem.atomicdir-tmp-4242-k3j5h2", // atomicdir's file writes before
		];
		const foreign = [".a.pem.tmp", ".tmp-notes", "a.pem", ".a.pem.certificatee-xyz.tmp"];
		for (const name of [...ours, ...foreign]) await writeFile(join(dir, name), "x");
		for (const name of [...ours, ...foreign]) await utimes(join(dir, name), old, old);
		await mkdir(join(dir, "sub"));
		await writeFile(join(dir, "sub", ".b.json.certificatee-ba9876543210.tmp"), "x");
		const young = ".c.pem.certificatee-aaaaaaaaaaaa.tmp";
		await writeFile(join(dir, young), "x");
		const inFlight = await writeTempFile(join(dir, "d.pem"), "x");
		await utimes(inFlight.temp, old, old);

		const swept = ours.map((n) => join(dir, n)).sort();
		expect((await sweepTempFiles(dir, { now, minAgeMs: 2_000, dryRun: true })).sort()).toEqual(swept);
		expect((await sweepTempFiles(dir, { now, minAgeMs: 2_000 })).sort()).toEqual(swept);
		expect((await readdir(dir)).sort()).toEqual(
			[...foreign, "sub", young, inFlight.temp.slice(dir.length + 1)].sort(),
		);
		expect(await sweepTempFiles(dir, { recursive: true })).toEqual(
			expect.arrayContaining([join(dir, "sub", ".b.json.certificatee-ba9876543210.tmp"), join(dir, young)]),
		);
		expect(writing.has(inFlight.temp)).toBe(true);
		inFlight.release();
		expect(await sweepTempFiles(dir)).toEqual([inFlight.temp]);
		expect(await sweepTempFiles(join(dir, "gone"))).toEqual([]);
	});
});
