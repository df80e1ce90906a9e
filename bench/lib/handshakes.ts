/** Drives bench/lib/handshaker.mjs: continuous TLS handshakes in a separate process during a rollout. */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
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

/** One NDJSON line of bench/lib/handshaker.mjs. */
type HandshakerLine =
	| { ready: true }
	| { latenciesMs: number[] }
	| { done: true; handshakes: number; failures: number; errors: Record<string, number> };

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
	// NDJSON, read line by line as it arrives (a line is handled only once its newline came): latencies
	// accumulate here, the "done" line carries the counts. Nothing is parsed before it is complete.
	const latencies: number[] = [];
	let done: { handshakes: number; failures: number; errors: Record<string, number> } | undefined;
	let signalReady: () => void = () => undefined;
	const readyLine = new Promise<void>((resolve) => {
		signalReady = resolve;
	});
	const lines = createInterface({ input: child.stdout, crlfDelay: Number.POSITIVE_INFINITY });
	lines.on("line", (text) => {
		if (text.trim() === "") return;
		const message = JSON.parse(text) as HandshakerLine;
		if ("ready" in message) signalReady();
		else if ("latenciesMs" in message) for (const ms of message.latenciesMs) latencies.push(ms);
		else if ("done" in message) done = message;
	});
	// "close" (stdout drained and the process gone), not "exit": lines can still be in the pipe at exit.
	const closed = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
	await Promise.race([
		readyLine,
		closed.then((code) => {
			throw new Error(`handshaker exited ${code} before it was ready`);
		}),
	]);
	return {
		async stop() {
			child.stdin.end("stop\n");
			const code = await closed;
			if (done === undefined) throw new Error(`handshaker exited ${code} without its final line`);
			const raw = { ...done, latenciesMs: latencies };
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
