/**
 * Issue 25, finding 1: certificatee as root writing into a parent another account can write. A racing
 * process of that account swaps names for symlinks to a root-owned directory ("victim") while syncs run;
 * the victim must never be written, chmod'ed or chown'ed, no key may land in a directory that account
 * owns, and the lock file is never opened through a planted link or FIFO. Without root the racer runs as
 * the same user: the victim is then the writer's own, and must stay untouched all the same.
 */
import { execFileSync } from "node:child_process";
import {
	chmodSync,
	chownSync,
	lstatSync,
	mkdirSync,
	readdirSync,
	rmSync,
	statSync,
	symlinkSync,
} from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { syncDirectory, writeFileAtomic } from "../../src/atomicdir/index.js";
import { CertificateeError } from "../../src/errors.js";
import { combinedContent, versionedFiles } from "./children/versioned.js";
import { type Child, heldVersion, startChild, tempDir } from "./helpers.js";

const asRoot = process.getuid?.() === 0;
const ATTACKER = asRoot ? { uid: 4242, gid: 4242 } : undefined;
const OWNERS = asRoot ? [{ uid: 4343, gid: 4343 }, undefined] : [undefined];
/** Rounds per race, and a bound in time so a slow machine ends it early (it then needs fewer swaps). */
const ROUNDS = 300;
const RACE_MS = 20_000;

const dirs: string[] = [];
const children: Child[] = [];
afterEach(async () => {
	for (const c of children.splice(0)) c.kill();
	for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

interface Scene {
	parent: string;
	victim: string;
	target: string;
}

/** scratch/shared (the attacker's, holding the target) and scratch/victim (root's, 0755, empty). */
function scene(): Scene {
	const root = tempDir("atomicdir-race-");
	dirs.push(root);
	chmodSync(root, 0o755);
	const parent = join(root, "shared");
	const victim = join(root, "victim");
	mkdirSync(parent, { mode: 0o755 });
	mkdirSync(victim, { mode: 0o755 });
	chmodSync(victim, 0o755);
	if (ATTACKER) chownSync(parent, ATTACKER.uid, ATTACKER.gid);
	return { parent, victim, target: join(parent, "certs") };
}

function expectVictimUntouched(s: Scene, round: number): void {
	const st = statSync(s.victim);
	const seen = { round, entries: readdirSync(s.victim), uid: st.uid, mode: st.mode & 0o7777 };
	expect(seen).toEqual({ round, entries: [], uid: process.getuid?.(), mode: 0o755 });
}

/** Every directory under `dir` (never following a link) that holds a tls.key: none the attacker owns. */
function keyDirectoriesOwnedBy(dir: string, uid: number): string[] {
	const out: string[] = [];
	for (const name of readdirSync(dir)) {
		const path = join(dir, name);
		const st = lstatSync(path);
		if (!st.isDirectory()) continue;
		if (readdirSync(path).includes("tls.key") && st.uid === uid) out.push(path);
		out.push(...keyDirectoriesOwnedBy(path, uid));
	}
	return out;
}

/** After a round the attacker won (a link published at the target's name), root removes the link and what was moved. */
function repair(s: Scene): void {
	const st = lstatSync(s.target, { throwIfNoEntry: false });
	if (st?.isSymbolicLink()) rmSync(s.target, { force: true });
	for (const name of readdirSync(s.parent)) {
		if (name.includes(".moved")) rmSync(join(s.parent, name), { recursive: true, force: true });
	}
}

async function race(s: Scene, mode: "staging" | "target", swap: "exchange" | "symlink") {
	const attacker = await startChild("attacker", [mode, s.parent, s.victim, "certs"], {}, ATTACKER);
	children.push(attacker);
	await attacker.waitFor((l) => l === "ready");
	const deadline = Date.now() + RACE_MS;
	let written = 0;
	let refused = 0;
	for (let round = 0; round < ROUNDS && Date.now() < deadline; round++) {
		const owner = OWNERS[round % OWNERS.length];
		try {
			await syncDirectory(s.target, versionedFiles(round + 2), {
				swap,
				owner,
				dirMode: round % 2 === 0 ? 0o750 : 0o755,
				allowWritableParent: true,
				durable: round % 4 === 0,
			});
			written++;
		} catch (e) {
			// Losing a race may fail a sync (the attacker replaced the target): never crash, never touch the victim.
			expect(e).toBeInstanceOf(CertificateeError);
			refused++;
		}
		expectVictimUntouched(s, round);
		if (mode === "staging") repair(s);
	}
	attacker.send("stop");
	await attacker.waitFor((l) => l.startsWith("swaps "));
	const swaps = Number(attacker.lines.find((l) => l.startsWith("swaps "))?.slice(6));
	expect(swaps).toBeGreaterThan(0);
	expect(written).toBeGreaterThan(0);
	if (ATTACKER) expect(keyDirectoriesOwnedBy(s.parent, ATTACKER.uid)).toEqual([]);
	console.log(`${mode}/${swap}: ${swaps} swaps, ${written} syncs written, ${refused} refused`);
	return { swaps, written, refused };
}

describe("atomicdir against a racing account that can write the parent", () => {
	it("exchange: staging directories swapped for symlinks never redirect a mkdir, chmod, chown or write", async () => {
		const s = scene();
		await syncDirectory(s.target, versionedFiles(1), { allowWritableParent: true });
		const { swaps } = await race(s, "staging", "exchange");
		expect(swaps).toBeGreaterThan(0);
	}, 60_000);

	it("symlink: the target swapped for a symlink and back never redirects a version, link, chmod or chown", async () => {
		const s = scene();
		await syncDirectory(s.target, versionedFiles(1), { swap: "symlink", allowWritableParent: true });
		await race(s, "target", "symlink");
		// Once the racer stops, the next sync converges.
		const final = await syncDirectory(s.target, versionedFiles(9999), {
			swap: "symlink",
			allowWritableParent: true,
		});
		expect(final.status).toBe("written");
		expect(heldVersion(s.target)).toBe(9999);
	}, 60_000);

	it("a planted .certs.lock symlink is refused: root never creates or opens the file it points to", async () => {
		const s = scene();
		symlinkSync(join(s.victim, "created-by-root"), join(s.parent, ".certs.lock"));
		const error = await syncDirectory(s.target, versionedFiles(1), { allowWritableParent: true }).then(
			() => undefined,
			(e: unknown) => e,
		);
		expect(error).toMatchObject({ code: "ATOMICDIR_SWAP_FAILED" });
		expect((error as CertificateeError).message).toMatch(/\.certs\.lock is not a regular file/);
		expect((error as CertificateeError).hint).toMatch(/never follows a link it did not make/);
		expectVictimUntouched(s, 0);
		expect(readdirSync(s.parent)).toEqual([".certs.lock"]);
	});

	it("a planted .certs.lock FIFO neither blocks the writer nor is used as the lock", async () => {
		const s = scene();
		execFileSync("mkfifo", [join(s.parent, ".certs.lock")]);
		// In a child: a writer that opened the FIFO would block its whole event loop, and this one's with it.
		const writer = await startChild("writer", [s.target, "exchange", "1", "1", "0"], {
			ALLOW_WRITABLE_PARENT: "1",
		});
		children.push(writer);
		const exit = await Promise.race([
			writer.exited,
			new Promise<"hung">((r) => setTimeout(() => r("hung"), 15_000)),
		]);
		expect(exit).not.toBe("hung");
		expect(exit).toMatchObject({ code: 1 });
		expect((exit as { stderr: string }).stderr).toMatch(/\.certs\.lock is not a regular file/);
	}, 30_000);

	it.each([
		["owned by another account", (p: string) => chownSync(p, 4242, 4242), /owned by uid 4242/],
		["world-writable", (p: string) => chmodSync(p, 0o777), /everyone may write it \(mode 0777\)/],
		[
			"world-writable and sticky",
			(p: string) => chmodSync(p, 0o1777),
			/everyone may write it \(mode 01777\)/,
		],
		[
			"writable by another group",
			(p: string) => {
				chownSync(p, process.getuid?.() ?? 0, 4242);
				chmodSync(p, 0o775);
			},
			/group 4242 may write it/,
		],
	])(
		"a parent %s is refused with ATOMICDIR_UNSAFE_PARENT unless allowed, nothing written",
		async (_what, make, why) => {
			const s = scene();
			if (!asRoot && _what !== "world-writable" && _what !== "world-writable and sticky") {
				// Without root the ownership can't be given away: the mode cases cover the check.
				chmodSync(s.parent, 0o777);
				why = /everyone may write it/;
			} else {
				if (ATTACKER) chownSync(s.parent, 0, 0);
				make(s.parent);
			}
			const error = await syncDirectory(s.target, versionedFiles(1)).then(
				() => undefined,
				(e: unknown) => e,
			);
			expect(error).toMatchObject({ code: "ATOMICDIR_UNSAFE_PARENT" });
			expect((error as CertificateeError).message).toMatch(why);
			expect((error as CertificateeError).message).toContain(s.parent);
			expect((error as CertificateeError).hint).toMatch(/allow_writable_parent: true/);
			expect(readdirSync(s.parent)).toEqual([]);
			const file = await writeFileAtomic(join(s.parent, "a.pem"), {
				content: combinedContent(1),
				mode: 0o600,
			}).then(
				() => undefined,
				(e: unknown) => e,
			);
			expect(file).toMatchObject({ code: "ATOMICDIR_UNSAFE_PARENT" });
			const allowed = await syncDirectory(s.target, versionedFiles(1), { allowWritableParent: true });
			expect(allowed.status).toBe("written");
		},
	);
});
