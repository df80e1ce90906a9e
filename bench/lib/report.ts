/**
 * One scenario's result: its parameters and rows of certificatee's figure beside the baseline's, measured in
 * the same run. Printed as a table; written as JSON and Markdown to bench/results/<date>-<scenario>.{json,md}.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";

export interface Row {
	/** What is measured, with its unit: "rollout wall (s)". */
	metric: string;
	/** certificatee's figure (undefined: not applicable, or the run failed). */
	certificatee?: number;
	/** The baseline's figure in the same run. */
	baseline?: number;
	/** Which baseline: "reload (SIGUSR2)". */
	baselineName: string;
	/** The variant of certificatee this row measures: "haproxy-runtime target". */
	variant: string;
	/** baseline / certificatee unless stated otherwise. */
	ratio?: number;
	note?: string;
}

export interface ScenarioResult {
	scenario: string;
	title: string;
	parameters: Record<string, string | number | boolean>;
	rows: Row[];
	/** Lines printed under the table: what ran, skips, checks. */
	notes: string[];
	durationS: number;
}

export function ratio(baseline: number | undefined, certificatee: number | undefined): number | undefined {
	if (baseline === undefined || certificatee === undefined) return undefined;
	if (certificatee === 0) return baseline === 0 ? 1 : Number.POSITIVE_INFINITY;
	return baseline / certificatee;
}

export function fmt(n: number | undefined): string {
	if (n === undefined || Number.isNaN(n)) return "–";
	if (!Number.isFinite(n)) return "∞";
	if (Number.isInteger(n) && Math.abs(n) < 1e9) return String(n);
	const abs = Math.abs(n);
	if (abs >= 100) return n.toFixed(0);
	if (abs >= 10) return n.toFixed(1);
	if (abs >= 1) return n.toFixed(2);
	return n.toPrecision(2);
}

export function markdown(result: ScenarioResult): string {
	const params = Object.entries(result.parameters)
		.map(([k, v]) => `${k}=${v}`)
		.join(", ");
	const lines = [
		`### ${result.title}`,
		"",
		`Parameters: ${params}`,
		"",
		"| metric | certificatee variant | certificatee | baseline | baseline figure | ratio (baseline / certificatee) |",
		"| --- | --- | --- | --- | --- | --- |",
		...result.rows.map(
			(r) =>
				`| ${r.metric} | ${r.variant} | ${fmt(r.certificatee)} | ${r.baselineName} | ${fmt(r.baseline)} | ${fmt(r.ratio)}${r.note ? ` (${r.note})` : ""} |`,
		),
		"",
		...result.notes.map((n) => `- ${n}`),
		"",
	];
	return lines.join("\n");
}

function pad(cells: string[][]): string {
	const widths = cells[0]!.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)));
	return cells.map((row) => row.map((c, i) => c.padEnd(widths[i]!)).join("  ")).join("\n");
}

export function printResult(result: ScenarioResult): void {
	const head = ["metric", "certificatee variant", "certificatee", "baseline", "baseline fig.", "ratio"];
	const body = result.rows.map((r) => [
		r.metric,
		r.variant,
		fmt(r.certificatee),
		r.baselineName,
		fmt(r.baseline),
		`${fmt(r.ratio)}${r.note ? ` (${r.note})` : ""}`,
	]);
	console.log(`\n== ${result.title} (${result.durationS.toFixed(0)} s)`);
	console.log(
		`   ${Object.entries(result.parameters)
			.map(([k, v]) => `${k}=${v}`)
			.join(", ")}`,
	);
	console.log(pad([head, ...body]));
	for (const n of result.notes) console.log(`  * ${n}`);
}

export function machine(): Record<string, string | number> {
	return {
		cpus: cpus().length,
		cpuModel: cpus()[0]?.model ?? "unknown",
		memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
		node: process.version,
		loadavg1m: Math.round(loadavg()[0]! * 100) / 100,
	};
}

/** Writes bench/results/<YYYY-MM-DD>-<scenario>.{json,md}; returns the two paths. */
export function writeResult(dir: string, result: ScenarioResult, command: string): string[] {
	mkdirSync(dir, { recursive: true });
	const date = new Date().toISOString().slice(0, 10);
	const base = join(dir, `${date}-${result.scenario}`);
	const json = { ...result, command, machine: machine(), finishedAt: new Date().toISOString() };
	writeFileSync(`${base}.json`, `${JSON.stringify(json, null, 2)}\n`);
	const m = machine();
	writeFileSync(
		`${base}.md`,
		`${markdown(result)}\nCommand: \`${command}\` on ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, Node ${m.node}, ${json.finishedAt}; load average (1 min) at the end: ${m.loadavg1m} (other work on the machine shares the cores).\n`,
	);
	return [`${base}.json`, `${base}.md`];
}
