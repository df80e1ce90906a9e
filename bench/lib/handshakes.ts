/** Drives bench/lib/handshaker.mjs: continuous TLS handshakes in a separate process during a rollout. */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { percentile } from "./proc.js";

export interface HandshakeStats {
	handshakes: number;
	failures: number;
	errors: Record<string, number>;
	p50Ms?: number;
	p99Ms?: number;
	maxMs?: number;
}

const script = fileURLToPath(new URL("./handshaker.mjs", import.meta.url));

/** Starts handshaking against 127.0.0.1:port over `names` (written to dir/names.txt); resolves once running. */
export async function startHandshakes(
	port: number,
	names: readonly string[],
	dir: string,
	concurrency = 1,
): Promise<{ stop(): Promise<HandshakeStats> }> {
	const file = join(dir, `sni-${port}.txt`);
	writeFileSync(file, `${names.join("\n")}\n`);
	const child = spawn(process.execPath, [script, String(port), file, String(concurrency)], {
		stdio: ["pipe", "pipe", "inherit"],
	});
	let out = "";
	child.stdout.setEncoding("utf8");
	const ready = new Promise<void>((resolve, reject) => {
		child.stdout.on("data", (d: string) => {
			out += d;
			if (out.includes("ready\n")) resolve();
		});
		child.once("exit", (code) => reject(new Error(`handshaker exited ${code}`)));
	});
	await ready;
	// "close", not "exit": the stats line can still be in the pipe when the process has exited (a large
	// latency list was parsed half-read: "Expected ',' or ']' after array element").
	const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
	return {
		async stop() {
			child.stdin.write("stop\n");
			await exited;
			const last = out.trim().split("\n").at(-1) ?? "{}";
			const raw = JSON.parse(last) as {
				handshakes: number;
				failures: number;
				errors: Record<string, number>;
				latenciesMs: number[];
			};
			const stats: HandshakeStats = {
				handshakes: raw.handshakes,
				failures: raw.failures,
				errors: raw.errors,
			};
			const p50 = percentile(raw.latenciesMs, 50);
			const p99 = percentile(raw.latenciesMs, 99);
			const max = percentile(raw.latenciesMs, 100);
			if (p50 !== undefined) stats.p50Ms = p50;
			if (p99 !== undefined) stats.p99Ms = p99;
			if (max !== undefined) stats.maxMs = max;
			return stats;
		},
	};
}
