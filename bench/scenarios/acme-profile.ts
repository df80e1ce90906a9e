/**
 * certificatee's variant of scenario 3 alone, for profiling: validation skipped, one fresh Pebble, M orders
 * at the given concurrency. With a third argument, a V8 CPU profile of the issuance alone (not the module
 * loading or Pebble's start) is written there (.cpuprofile: Chrome DevTools, speedscope).
 *
 *   npx tsx bench/scenarios/acme-profile.ts [M=50] [concurrency=10] [out.cpuprofile]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { startPebble } from "../../test/harness/pebble.js";
import { certificatee } from "./acme.js";

const m = Number(process.argv[2] ?? 50);
const concurrency = Number(process.argv[3] ?? 10);
const out = process.argv[4];
const pebble = await startPebble({ validation: "always-valid" });
const dir = await mkdtemp(join(tmpdir(), "certificatee-acme-profile-"));
const inspector = new Session();
try {
	const names = Array.from({ length: m }, (_, i) => `p${i}.test`);
	if (out) {
		inspector.connect();
		await inspector.post("Profiler.enable");
		await inspector.post("Profiler.setSamplingInterval", { interval: 100 });
		await inspector.post("Profiler.start");
	}
	const r = await certificatee(pebble, names, concurrency, dir);
	if (out) {
		const { profile } = await inspector.post("Profiler.stop");
		await writeFile(out, JSON.stringify(profile));
	}
	console.log(
		`${r.issued}/${m} in ${r.wallS.toFixed(2)} s, CPU ${r.cpuS.toFixed(2)} s${r.error ? ` (${r.error})` : ""}; load average ${loadavg()[0]!.toFixed(2)}`,
	);
} finally {
	inspector.disconnect();
	await pebble.stop();
	await rm(dir, { recursive: true, force: true });
}
