/**
 * The certificatee side of the fleet measurement, alone in its own process so its peak memory is its own:
 * one haproxy-dataplane target over every endpoint, `cycles` sync cycles with every certificate already in
 * place. argv: a JSON file {endpoints, storageDir, certDir, cycles}. Prints one JSON line.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseBundle } from "../../src/certificates/index.js";
import { runCycle } from "../../src/reconcile/cycle.js";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import { dataplaneTargetSchema } from "../../src/targets/haproxy-dataplane/schema.js";
import { buildTarget } from "../../src/targets/registry.js";

interface Job {
	endpoints: Array<{ name: string; url: string; username: string; password: string }>;
	storageDir: string;
	certDir: string;
	cycles: number;
}

const job = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as Job;
const rssBefore = process.memoryUsage().rss;
const desired: DesiredCertificate[] = readdirSync(job.certDir)
	.filter((f) => f.endsWith(".pem"))
	.map((f) => {
		const name = f.replace(/\.pem$/, "");
		const bundle = parseBundle({ combined: readFileSync(join(job.certDir, f), "utf8") }, { source: name });
		return { name, names: [`${name}.bench.test`], bundle, origin: "bench" };
	});
const target = buildTarget(
	dataplaneTargetSchema.parse({
		name: "fleet",
		type: "haproxy-dataplane",
		storage_dir: job.storageDir,
		endpoints: job.endpoints,
	}),
	{ now: () => new Date() },
);
let peak = process.memoryUsage().rss;
const sampler = setInterval(() => {
	peak = Math.max(peak, process.memoryUsage().rss);
}, 20);
const cycles: Array<{ wallS: number; cpuS: number; writes: number; failedEndpoints: number; refs: number }> =
	[];
const errors = new Set<string>();
for (let i = 0; i < job.cycles; i++) {
	const started = performance.now();
	const cpu0 = process.cpuUsage();
	const report = await runCycle(
		{
			loadDesired: async () => ({ certificates: desired, problems: [] }),
			targets: [target],
			now: () => new Date(),
		},
		"sync",
		new AbortController().signal,
	);
	const endpoints = report.targets.flatMap((t) => t.endpoints);
	for (const e of endpoints)
		if (!e.ok && e.error) errors.add(`${e.error.code}: ${e.error.message.replace(/lb\d+/g, "lbN")}`);
	cycles.push({
		wallS: (performance.now() - started) / 1000,
		cpuS: ((c) => (c.user + c.system) / 1e6)(process.cpuUsage(cpu0)),
		writes: endpoints.reduce((n, e) => n + e.steps.length, 0),
		failedEndpoints: endpoints.filter((e) => !e.ok).length,
		refs: endpoints.reduce((n, e) => n + e.refs.length, 0),
	});
}
clearInterval(sampler);
await target.close();
const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"));
process.stdout.write(
	`${JSON.stringify({
		cycles,
		rssBeforeMiB: rssBefore / 2 ** 20,
		rssPeakMiB: Math.max(peak, Number(hwm?.[1] ?? 0) * 1024) / 2 ** 20,
		desired: desired.length,
		errors: [...errors].slice(0, 5),
	})}\n`,
);
process.exit(0);
