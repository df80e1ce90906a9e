/**
 * certificatee's variant of scenario 3 alone, for profiling: one fresh Pebble (validation skipped, or real
 * HTTP-01), M orders at the given concurrency. With a fourth argument, a V8 CPU profile of the issuance
 * alone (not the module loading or Pebble's start) is written there (.cpuprofile: Chrome DevTools,
 * speedscope), and its top self-time functions are printed as Markdown (bench/lib/cpuprofile.ts). The
 * profiler samples wall time: on a loaded machine, time the process spent descheduled is charged to
 * whatever it was running.
 *
 *   npx tsx bench/scenarios/acme-profile.ts [M=50] [concurrency=10] [always-valid|http-01] [out.cpuprofile]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { startPebble } from "../../test/harness/pebble.js";
import { selfTimeMarkdown } from "../lib/cpuprofile.js";
import { certificatee } from "./acme.js";

const m = Number(process.argv[2] ?? 50);
const concurrency = Number(process.argv[3] ?? 10);
const mode = process.argv[4] ?? "always-valid";
const out = process.argv[5];
const pebble = await startPebble({ validation: mode === "http-01" ? "real" : "always-valid" });
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
	console.log(
		`${r.issued}/${m} in ${r.wallS.toFixed(2)} s, CPU ${r.cpuS.toFixed(2)} s${r.error ? ` (${r.error})` : ""}; load average ${loadavg()[0]!.toFixed(2)}`,
	);
	if (out) {
		const { profile } = await inspector.post("Profiler.stop");
		await writeFile(out, JSON.stringify(profile));
		console.log(
			selfTimeMarkdown(
				out,
				`certificatee, ${m} orders, concurrency ${concurrency}, ${mode}: CPU profile of the issuance`,
			),
		);
	}
} finally {
	inspector.disconnect();
	await pebble.stop();
	await rm(dir, { recursive: true, force: true });
}
