/**
 * Scenario "sources": what reading a directory of N certificate files costs, the way a user meets it.
 *
 *   validate   `certificatee validate` over a directory source of N files, the CLI process as a user runs it
 *              (start-up included): wall and CPU (every thread). Baselines in the same run: a shell loop doing
 *              the same checks per file with openssl (parses, not expired, key matches the certificate), and
 *              `haproxy -c` loading the same N files (what a deploy hook runs before a reload).
 *   no-op      a running `certificatee run` (that directory source, one haproxy-runtime target on a live HAProxy
 *              that already serves the N certificates): cycles woken by the source watch (a file that is not a
 *              certificate touched in the directory) while no certificate changed: the cycle's own duration (its
 *              log line), its writes and the daemon's CPU; against `haproxy -c`.
 *   start-up   `certificatee --version` against `node -e 0` (the floor of any Node.js CLI).
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { CLI, ensureBuilt, spawnCertificatee } from "../../test/harness/cli.js";
import { HAPROXY_BIN, startHaproxy } from "../../test/harness/haproxy.js";
import { busiestProfile, selfTimeMarkdown } from "../lib/cpuprofile.js";
import { writeDaemonConfig } from "../lib/daemon.js";
import { crtDirFiles, makeCerts } from "../lib/pool.js";
import { cpuSeconds, median } from "../lib/proc.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";
import { type Timed, timedBash } from "../lib/shell.js";

export interface SourcesOptions {
	certs: number;
	/** Runs of each timed variant (median reported). */
	reps: number;
	/** Profile one more validate run (node --cpu-prof, every thread) into this directory, summarised in summary.md. */
	cpuProfDir?: string;
}

/** Files the openssl loop is timed over (the rest is scaled: it is linear). */
const LOOP_SAMPLE = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const q = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

async function medianRun(
	reps: number,
	script: string,
	timeoutMs: number,
): Promise<Timed & { runs: Timed[] }> {
	const runs: Timed[] = [];
	for (let i = 0; i < reps; i++) {
		const r = await timedBash(script, process.env, timeoutMs);
		if (r.error) throw new Error(`${script.slice(0, 120)}: ${r.error}`);
		runs.push(r);
	}
	const byWall = [...runs].sort((a, b) => a.wallS - b.wallS);
	return { ...(byWall[Math.floor(byWall.length / 2)] as Timed), runs };
}

/**
 * The same checks as validate, per file, in a shell: parses, not expired, the key's public key is the
 * certificate's. Three openssl processes a file (~0.15 s on 2 cores): timed over the first `files` only.
 */
function opensslLoop(dir: string, files: number): string {
	return [
		`bad=0; for f in $(ls ${q(dir)}/*.pem | head -n ${files}); do`,
		`  openssl x509 -noout -checkend 0 -in "$f" >/dev/null &&`,
		`  [ "$(openssl x509 -noout -pubkey -in "$f")" = "$(openssl pkey -pubout -in "$f")" ] || bad=$((bad+1))`,
		"done; echo bad=$bad",
	].join("\n");
}

export async function sources(o: SourcesOptions): Promise<ScenarioResult> {
	const t0 = performance.now();
	await ensureBuilt();
	const work = await mkdtemp(join(tmpdir(), "certificatee-bench-sources-"));
	const notes: string[] = [];
	try {
		const certs = await makeCerts(o.certs);
		const source = join(work, "source");
		await mkdir(source);
		for (const c of certs)
			await writeFile(join(source, `${c.name}.pem`), c.leaf.combinedPem, { mode: 0o600 });
		const validateConfig = join(work, "validate.yaml");
		await writeFile(
			validateConfig,
			[
				`state_dir: ${join(work, "state-validate")}`,
				"sources:",
				`  - { name: files, type: directory, path: ${source} }`,
				"targets: []",
			].join("\n"),
		);

		// Start-up.
		const version = await medianRun(5, `node ${q(CLI)} --version >/dev/null`, 60_000);
		const nodeFloor = await medianRun(5, "node -e 0", 60_000);

		// validate, as a user runs it; then the baselines.
		const validate = await medianRun(o.reps, `node ${q(CLI)} validate -c ${q(validateConfig)}`, 600_000);
		if (!/: valid$/m.test(validate.stdout)) throw new Error(`validate did not pass: ${validate.stdout}`);
		if (o.cpuProfDir)
			notes.push(`CPU profile of validate: ${await profileValidate(o.cpuProfDir, validateConfig, o.certs)}`);
		const sample = Math.min(o.certs, LOOP_SAMPLE);
		const sampled = await medianRun(1, opensslLoop(source, sample), 1_800_000);
		if (!/bad=0/.test(sampled.stdout)) throw new Error(`the openssl loop found bad files: ${sampled.stdout}`);
		// Linear in the number of files (a process per check): scaled from the sample to N, and said so.
		const loop = { wallS: (sampled.wallS * o.certs) / sample, cpuS: (sampled.cpuS * o.certs) / sample };

		const h = await startHaproxy({ crtDir: crtDirFiles(certs) });
		let check: Awaited<ReturnType<typeof medianRun>>;
		let noop: Awaited<ReturnType<typeof daemonNoop>>;
		try {
			check = await medianRun(o.reps, `${q(HAPROXY_BIN)} -c -q -f ${q(h.configPath)}`, 600_000);
			noop = await daemonNoop(work, source, h, o.reps, o.cpuProfDir);
		} finally {
			await h.stop();
		}
		const sourceLoadS = await sourceLoadAlone(source, o.reps);

		const cycleS = median(noop.durationS) as number;
		const rows: Row[] = [
			{
				metric: `validate ${o.certs} files: wall (s)`,
				variant: "certificatee validate (CLI process)",
				baselineName: `shell loop: openssl x509 -checkend + pubkey = pkey -pubout, per file${sample < o.certs ? ` (timed over ${sample} files, × ${o.certs / sample})` : ""}`,
				certificatee: validate.wallS,
				baseline: loop.wallS,
				ratio: ratio(loop.wallS, validate.wallS),
			},
			{
				metric: `validate ${o.certs} files: wall (s)`,
				variant: "certificatee validate (CLI process)",
				baselineName: "haproxy -c (loads the same files)",
				certificatee: validate.wallS,
				baseline: check.wallS,
				ratio: ratio(check.wallS, validate.wallS),
				note: "goal: certificatee ≤ 3 s at N = 5000",
			},
			{
				metric: `validate ${o.certs} files: CPU (s)`,
				variant: "certificatee validate (CLI process, all threads)",
				baselineName: "haproxy -c",
				certificatee: validate.cpuS,
				baseline: check.cpuS,
				ratio: ratio(check.cpuS, validate.cpuS),
			},
			{
				metric: `no-op cycle, ${o.certs} certs, source loading included (s)`,
				variant: "certificatee run: directory source → haproxy-runtime, woken by the watch",
				baselineName: "haproxy -c",
				certificatee: cycleS,
				baseline: check.wallS,
				ratio: ratio(check.wallS, cycleS),
				note: "goal: ≤ 0.2 s at N = 5000",
			},
			{
				metric: `no-op cycle, ${o.certs} certs: writes`,
				variant: "certificatee run (the cycle's log line, most of any cycle)",
				baselineName: "–",
				certificatee: Math.max(...noop.writes),
				note: "must be 0",
			},
			{
				metric: "start-up: --version (s)",
				variant: "certificatee --version (CLI process)",
				baselineName: "node -e 0",
				certificatee: version.wallS,
				baseline: nodeFloor.wallS,
				ratio: ratio(nodeFloor.wallS, version.wallS),
			},
		];
		notes.push(
			`validate: runs ${validate.runs.map((r) => `${r.wallS.toFixed(2)} s (CPU ${r.cpuS.toFixed(2)} s)`).join(", ")}; openssl loop over ${sample} files ${sampled.wallS.toFixed(1)} s (CPU ${sampled.cpuS.toFixed(1)} s); haproxy -c runs ${check.runs.map((r) => `${r.wallS.toFixed(2)} s`).join(", ")} (CPU ${check.cpuS.toFixed(2)} s).`,
			`no-op cycles (durationMs of each cycle's log line): ${noop.durationS.map((s) => s.toFixed(3)).join(", ")} s; writes ${noop.writes.join(", ")}; the daemon's CPU per cycle ${noop.cpuS.map((s) => s.toFixed(2)).join(", ")} s (from /proc, includes the watch and the log line).`,
			...(noop.profile ? [`CPU profile of the no-op cycles: ${noop.profile}`] : []),
			`Source loading alone (the built directory source's load() in a node process of its own, unchanged files, median of ${o.reps}): ${(sourceLoadS * 1000).toFixed(1)} ms.`,
			`start-up: certificatee --version ${version.wallS.toFixed(2)} s (CPU ${version.cpuS.toFixed(2)} s), node -e 0 ${nodeFloor.wallS.toFixed(2)} s (CPU ${nodeFloor.cpuS.toFixed(2)} s).`,
			"Single-name ECDSA P-256 leaves from one bench CA, one combined .pem file each; HAProxy 2.6 (Debian) for the target and haproxy -c. The daemon's cycles were woken by touching a hidden file in the source directory (its watch fires on any change; no certificate changed).",
		);
		return {
			scenario: "sources",
			title: "Reading a directory source: validate, and the daemon's no-op cycle",
			parameters: { N_files: o.certs, reps: o.reps, key: "ECDSA P-256" },
			rows,
			notes,
			durationS: (performance.now() - t0) / 1000,
		};
	} finally {
		await rm(work, { recursive: true, force: true });
	}
}

/** One validate run under node --cpu-prof; each thread's top self times into `dir`/summary.md. */
async function profileValidate(dir: string, config: string, n: number): Promise<string> {
	await mkdir(dir, { recursive: true });
	const before = new Set(await readdir(dir));
	const r = await timedBash(
		`node --cpu-prof --cpu-prof-dir=${q(dir)} ${q(CLI)} validate -c ${q(config)}`,
		process.env,
		600_000,
	);
	if (r.error) throw new Error(`validate under --cpu-prof: ${r.error}`);
	const files = (await readdir(dir)).filter((f) => f.endsWith(".cpuprofile") && !before.has(f)).sort();
	const tables = files.map((f, i) =>
		selfTimeMarkdown(
			join(dir, f),
			`certificatee validate, ${n} files: ${i === 0 ? "main thread" : `parse worker ${i}`} (${f})`,
			20,
		),
	);
	const summary = join(dir, "summary.md");
	await writeFile(
		summary,
		`${tables.join("\n")}\nThe run took ${r.wallS.toFixed(2)} s wall, ${r.cpuS.toFixed(2)} s CPU (all threads; profiling adds to both). Load average (1 min) ${loadavg()[0]?.toFixed(2)} on ${cpus().length} cores.\n`,
	);
	return summary;
}

/** A running daemon, converged; `reps` cycles woken by the source watch with no certificate changed. */
async function daemonNoop(
	work: string,
	source: string,
	h: { adminSocket: string; crtDir: string },
	reps: number,
	cpuProfDir: string | undefined,
) {
	const config = await writeDaemonConfig(work, source, h, { file: "run.yaml", state: "state-run" });
	const d = spawnCertificatee(
		["run", "--config", config],
		cpuProfDir ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`] } : {},
	);
	const out = { durationS: [] as number[], writes: [] as number[], cpuS: [] as number[], profile: "" };
	try {
		await d.waitForLog(/cycle finished/, { timeoutMs: 600_000 });
		await sleep(2500); // past the source's racy window, as a long-running daemon would be
		// One woken cycle first (untimed): it reads again what the racy window kept from being trusted.
		for (let i = -1; i < reps; i++) {
			const from = d.logs.length;
			const cpu0 = cpuSeconds(d.child.pid as number);
			await writeFile(join(source, ".bench-touch"), String(i));
			const line = await d.waitForLog(/cycle finished/, { from, timeoutMs: 120_000 });
			await sleep(300); // the log line is written last; let the daemon go idle
			if (i < 0) continue;
			out.durationS.push(Number(line.durationMs) / 1000);
			out.writes.push(Number(line.writes));
			out.cpuS.push(cpuSeconds(d.child.pid as number) - cpu0);
		}
		if (cpuProfDir) {
			// The profile is written at a clean exit only; the window is after the 2.5 s pause: the woken cycles.
			d.signal("SIGTERM");
			await d.exited;
			const summary = join(cpuProfDir, "summary-noop.md");
			const table = selfTimeMarkdown(
				busiestProfile(cpuProfDir, d.child.pid ?? 0),
				`certificatee run, ${reps + 1} no-op cycles woken by the source watch: self time (node --cpu-prof)`,
				25,
				{ afterIdleGapMs: 2000 },
			);
			await writeFile(
				summary,
				`${table}\nThe window is the daemon's work after its 2.5 s pause: the woken no-op cycles only.\n`,
			);
			out.profile = summary;
		}
		return out;
	} finally {
		await d.stop();
	}
}

/**
 * The built directory source in a process of its own (the bench process holds the pool and is busy): one load,
 * past the racy window one more, then `reps` timed loads of the unchanged directory. Seconds, median.
 */
async function sourceLoadAlone(dir: string, reps: number): Promise<number> {
	const module = join(dirname(CLI), "../sources/directory/index.js");
	const script = `
		const { createDirectorySource } = await import(${JSON.stringify(module)});
		const s = createDirectorySource({ name: "files", type: "directory", path: ${JSON.stringify(dir)}, debounce: 100 });
		const signal = new AbortController().signal;
		await s.load(signal);
		await new Promise((r) => setTimeout(r, 2500));
		await s.load(signal);
		const times = [];
		for (let i = 0; i < ${reps}; i++) {
			const t = performance.now();
			await s.load(signal);
			times.push((performance.now() - t) / 1000);
		}
		console.log(JSON.stringify(times));`;
	const r = await timedBash(`node --input-type=module -e ${q(script)}`, process.env, 600_000);
	if (r.error) throw new Error(`source load alone: ${r.error}`);
	return median(JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "[]") as number[]) as number;
}
