/**
 * Longer runs of the atomicdir checks than the test suite affords, on a real disk with fsync:
 *   npx tsx bench/atomicdir.ts [--kills 1000] [--swaps 10000] [--dir /var/tmp]
 * Prints figures; exits 1 if any kill left an inconsistent target or a reader mixed versions.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { removeStaleStaging, syncDirectory } from "../src/atomicdir/index.js";
import { versionedFiles } from "../test/atomicdir/children/versioned.js";
import { heldVersion, stagingLeftovers, startChild } from "../test/atomicdir/helpers.js";

const { values } = parseArgs({
	options: {
		kills: { type: "string", default: "1000" },
		swaps: { type: "string", default: "10000" },
		dir: { type: "string", default: tmpdir() },
	},
});
const base = mkdtempSync(join(values.dir, "atomicdir-bench-"));
let failures = 0;

async function kills(rounds: number, swap: "exchange" | "symlink") {
	const target = join(base, `kill-${swap}`);
	await syncDirectory(target, versionedFiles(1), { swap });
	let held = 1;
	let left = 0;
	let inconsistent = 0;
	const started = Date.now();
	for (let round = 0; round < rounds; round++) {
		const writer = await startChild("writer", [target, swap, String(held + 1), "0", "1"]);
		await writer.waitFor((l) => l.startsWith("acked "));
		await new Promise((r) => setTimeout(r, Math.random() * 20));
		writer.kill("SIGKILL");
		await writer.exited;
		const acked = Math.max(
			held,
			...writer.lines.filter((l) => l.startsWith("acked ")).map((l) => Number(l.slice(6))),
		);
		if (stagingLeftovers(base).length > 0) left += 1;
		try {
			const now = heldVersion(target);
			if (now !== acked && now !== acked + 1) throw new Error(`version ${now}, acked ${acked}`);
			held = now;
		} catch (e) {
			inconsistent += 1;
			console.error(`round ${round}: ${(e as Error).message}`);
		}
		await removeStaleStaging(target);
		if (stagingLeftovers(base).length > 0) inconsistent += 1;
	}
	failures += inconsistent;
	console.log(
		`${swap}: ${rounds} SIGKILLs in ${((Date.now() - started) / 1000).toFixed(1)} s, ${inconsistent} inconsistent, ` +
			`${left} left staging (removed by the next start), reached version ${held}`,
	);
}

async function stress(swaps: number) {
	const target = join(base, "stress");
	const stop = join(base, "stop");
	await syncDirectory(target, versionedFiles(0));
	const tiers = ["dirfd", "identity", "naive"];
	const readers = await Promise.all(tiers.map((t) => startChild("reader", [target, t, stop])));
	const started = Date.now();
	const writer = await startChild("writer", [target, "exchange", "1", String(swaps), "1"]);
	await writer.exited;
	const seconds = (Date.now() - started) / 1000;
	writeFileSync(stop, "");
	await Promise.all(readers.map((r) => r.exited));
	for (const r of readers) {
		const s = JSON.parse(r.lines.at(-1) ?? "{}") as {
			tier: string;
			reads: number;
			mismatches: number;
			torn: number;
		};
		if (s.tier !== "naive") failures += s.mismatches + s.torn;
		console.log(
			`stress (fsync): ${swaps} swaps in ${seconds.toFixed(1)} s (${((1000 * seconds) / swaps).toFixed(2)} ms each); ` +
				`${s.tier}: ${s.reads} reads, ${s.mismatches} mixed (${((100 * s.mismatches) / Math.max(1, s.reads)).toFixed(2)} %), ${s.torn} torn`,
		);
	}
}

try {
	await stress(Number(values.swaps));
	await kills(Number(values.kills), "exchange");
	await kills(Math.ceil(Number(values.kills) / 3), "symlink");
} finally {
	rmSync(base, { recursive: true, force: true });
}
process.exit(failures === 0 ? 0 : 1);
