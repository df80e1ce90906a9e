/**
 * Durability of a batched roll (issue 12, goal 5): a cycle writes all its storage files, fsyncs them and their
 * directory, and only then commits at runtime. A certificatee killed (SIGKILL) at a random moment of a roll of
 * 30 certificates leaves every file in crt_dir a complete old or new certificate, HAProxy holding a complete old
 * or new one for every name, and no new certificate live in HAProxy before all the cycle's files are written (a
 * reload would bring an old one back). The next cycle converges and stays reload-safe.
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { leafMeta } from "../../../src/reconcile/leaf-meta.js";
import { RuntimeClient } from "../../../src/targets/haproxy-runtime/socket.js";
import { createTestCa, issueTestLeaf, type TestLeaf } from "../../harness/certs.js";
import { assertReloadSafe } from "../../harness/invariant.js";
import { rig, syncOnce } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

const CHILD = join(import.meta.dirname, "roll-child.ts");
const COUNT = 30;
/** Kills that must land within the writes, and the most kills tried. */
const MID_ROLL = 4;
const MAX_KILLS = 25;
const r = rig();

/** Starts a roll in a child process and SIGKILLs it `delayMs` after it is ready; how long it took when it finished first. */
async function killRoll(
	socket: string,
	crtDir: string,
	source: string,
	delayMs: number,
): Promise<number | undefined> {
	const child = spawn(process.execPath, ["--import", "tsx", CHILD, socket, crtDir, source], {
		stdio: ["ignore", "pipe", "pipe"],
	});
	let out = "";
	let err = "";
	child.stderr.on("data", (d: Buffer) => {
		err += d.toString();
	});
	const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
	await new Promise<void>((resolve, reject) => {
		child.stdout.on("data", (d: Buffer) => {
			out += d.toString();
			if (out.includes("ready")) resolve();
		});
		child.once("exit", (code) =>
			out.includes("ready") ? resolve() : reject(new Error(`roll child exited (${code}): ${err}`)),
		);
	});
	await Promise.race([sleep(delayMs), exited]);
	child.kill("SIGKILL");
	await exited;
	const done = /done (\w+) (\d+) ms/.exec(out);
	if (done && done[1] !== "ok") throw new Error(`the roll child's cycle failed: ${out}`);
	return done ? Number(done[2]) : undefined;
}

describe("haproxy-runtime: SIGKILL during a batched roll", () => {
	it(`leaves storage and runtime each complete old or new, never runtime ahead of storage (${MID_ROLL} kills within a roll of ${COUNT})`, async () => {
		const ca = await createTestCa("kill during roll CA");
		const names = Array.from({ length: COUNT }, (_, i) => `k${String(i).padStart(2, "0")}`);
		const issue = () => Promise.all(names.map((n) => issueTestLeaf(ca, { names: [`${n}.test`] })));
		let current: TestLeaf[] = await issue();
		const h = await r.haproxy({
			crtDir: Object.fromEntries(names.map((n, i) => [`${n}.pem`, current[i]!.combinedPem])),
		});
		const check = new RuntimeClient({ address: h.adminSocket, name: "check" });
		const scratch = await mkdtemp(join(tmpdir(), "certificatee-kill-roll-"));
		r.onTeardown(async () => {
			await check.close();
			await rm(scratch, { recursive: true, force: true });
		});
		// Kills until MID_ROLL of them landed within the writes (at most MAX_KILLS): the delay narrows to the
		// window between "no file written yet" and "finished first". The first roll is not killed: it measures one.
		let window = { lo: 0, hi: 0 };
		let midRoll = 0;
		const outcomes: string[] = [];
		for (let kill = 0; kill <= MAX_KILLS && midRoll < MID_ROLL; kill++) {
			const next = await issue();
			const source = join(scratch, `roll-${kill}`);
			await mkdir(source);
			for (const [i, n] of names.entries()) await writeFile(join(source, `${n}.pem`), next[i]!.combinedPem);
			const delay = kill === 0 ? 120_000 : Math.round(window.lo + Math.random() * (window.hi - window.lo));
			const tookMs = await killRoll(h.adminSocket, h.crtDir, source, delay);
			if (kill === 0) window = { lo: 0, hi: tookMs ?? 0 };
			let newFiles = 0;
			let newLive = 0;
			for (const [i, n] of names.entries()) {
				const old = current[i]!;
				const fresh = next[i]!;
				const file = leafMeta(await readFile(join(h.crtDir, `${n}.pem`), "utf8"));
				expect([old.serial, fresh.serial], `kill ${kill}: ${n}.pem is a complete certificate`).toContain(
					file.serial,
				);
				const live = (await check.showCert(join(h.crtDir, `${n}.pem`)))?.serial;
				expect([old.serial, fresh.serial], `kill ${kill}: HAProxy holds a complete ${n}`).toContain(live);
				if (live === fresh.serial) newLive += 1;
				if (file.serial === fresh.serial) newFiles += 1;
			}
			// The cycle's files are all written (and fsynced) before its first runtime commit.
			if (newLive > 0) expect(newFiles, `kill ${kill}: a commit before every file was written`).toBe(COUNT);
			const untouched = newFiles === 0 && newLive === 0;
			const done = newFiles === COUNT && newLive === COUNT;
			if (kill > 0 && untouched) window.lo = delay;
			else if (kill > 0 && done) window.hi = delay;
			else if (kill > 0) midRoll += 1;
			outcomes.push(
				`${kill === 0 ? "not killed" : `killed after ${delay} ms`}: ${newFiles} new files, ${newLive} new in HAProxy`,
			);
			// The next cycle (this process) finishes the roll, whatever the kill left (an open transaction included).
			const e = await syncOnce(
				r.runtime(h),
				names.map((n, i) => desiredFromLeaf(n, next[i]!, [`${n}.test`])),
				{ expectOk: true },
			);
			expect(e.steps.filter((s) => s.result !== "ok")).toEqual([]);
			for (const [i, n] of names.entries()) {
				expect((await check.showCert(join(h.crtDir, `${n}.pem`)))?.serial).toBe(next[i]!.serial);
			}
			current = next;
		}
		console.log(outcomes.join("\n"));
		expect(midRoll, `kills within the writes:\n${outcomes.join("\n")}`).toBe(MID_ROLL);
		await assertReloadSafe(h, { names: names.map((n) => `${n}.test`) });
	});
});
