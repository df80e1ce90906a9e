/**
 * Issue 11 item 11: a writer killed between the temp file's write and its rename leaves a temp file holding a
 * certificate and its private key in crt_dir. certificatee removes its own leftovers (its naming pattern only)
 * at the start of every cycle, never one it is writing right now.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { removeLeftovers } from "../../../src/targets/haproxy-runtime/storage.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";
import { assertReloadSafe } from "../../harness/invariant.js";
import { rig, syncOnce } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

const CHILD = join(import.meta.dirname, "storage-child.ts");
const TEMP = /\.certificatee-[0-9a-f]{12}\.tmp$/;
const r = rig();

/** Starts the writer, lets it write for a moment, kills it with SIGKILL; returns the temp files left. */
async function killWriter(dir: string, ref: string, pemFile: string): Promise<string[]> {
	const child = spawn(process.execPath, ["--import", "tsx", CHILD, dir, ref, pemFile], {
		stdio: ["ignore", "pipe", "pipe"],
	});
	const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_c, s) => resolve(s)));
	await new Promise<void>((resolve, reject) => {
		child.stdout.on("data", (d: Buffer) => {
			if (d.toString().includes("ready")) resolve();
		});
		child.once("exit", (code) => reject(new Error(`storage child exited early (${code})`)));
	});
	await sleep(40 + Math.random() * 60);
	child.kill("SIGKILL");
	expect(await exited).toBe("SIGKILL");
	return readdirSync(dir).filter((n) => TEMP.test(n));
}

describe("haproxy-runtime leftovers", () => {
	it("SIGKILL between temp write and rename: the next cycle removes the key-bearing temp file, reload-safe", async () => {
		const ca = await createTestCa("leftovers CA");
		const leaf = await issueTestLeaf(ca, { names: ["c20.test"] });
		const h = await r.haproxy({ crtDir: { "c00020.pem": leaf.combinedPem } });
		const pemFile = join(h.dir, "c20.source.pem");
		await writeFile(pemFile, leaf.combinedPem, { mode: 0o600 });

		// A kill can also land before the write (an empty temp file) or after the rename (none): kill until one
		// lands between them, as 1 in 40 did in the field.
		const keyBearing = (names: string[]) =>
			names.filter((n) => readFileSync(join(h.crtDir, n), "utf8").includes("PRIVATE KEY-----"));
		let left: string[] = [];
		let kills = 0;
		while (keyBearing(left).length === 0 && kills < 30) {
			left = await killWriter(h.crtDir, "c00020.pem", pemFile);
			kills += 1;
		}
		expect(
			keyBearing(left).length,
			`no kill out of ${kills} landed between write and rename`,
		).toBeGreaterThan(0);
		for (const name of left) expect(name).toMatch(/^\.c00020\.pem\.certificatee-[0-9a-f]{12}\.tmp$/);
		// Not certificatee's: never touched.
		await writeFile(join(h.crtDir, ".c00020.pem.other-tool.tmp"), "x");

		const t = r.runtime(h);
		// Older than a write in flight in another process could be.
		await sleep(2_100);
		const e = await syncOnce(t, [desiredFromLeaf("c00020", leaf, ["c20.test"])]);
		expect(e.ok).toBe(true);
		expect(readdirSync(h.crtDir).filter((n) => TEMP.test(n))).toEqual([]);
		expect(readdirSync(h.crtDir)).toContain(".c00020.pem.other-tool.tmp");
		await assertReloadSafe(h, { names: ["c20.test"] });
	});

	it("removes only certificatee's temp files, and only those older than a write in flight", async () => {
		const dir = await mkdtemp(join(tmpdir(), "certificatee-leftovers-"));
		r.onTeardown(() => rm(dir, { recursive: true, force: true }));
		const now = new Date();
		const old = new Date(now.getTime() - 60_000);
		const files = {
			stale: ".a.pem.certificatee-0123456789ab.tmp",
			fresh: ".b.pem.certificatee-ba9876543210.tmp",
			foreign: ".a.pem.tmp",
			cert: "a.pem",
		};
		for (const name of Object.values(files)) await writeFile(join(dir, name), "x");
		for (const name of [files.stale, files.foreign, files.cert]) await utimes(join(dir, name), old, old);
		expect(await removeLeftovers(dir, now, { dryRun: true })).toEqual([join(dir, files.stale)]);
		expect(readdirSync(dir)).toHaveLength(4);
		expect(await removeLeftovers(dir, now)).toEqual([join(dir, files.stale)]);
		expect(readdirSync(dir).sort()).toEqual([files.fresh, files.foreign, files.cert].sort());
		expect(await removeLeftovers(join(dir, "gone"), now)).toEqual([]);
	});
});
