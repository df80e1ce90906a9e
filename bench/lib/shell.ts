/** A bash script timed the way a user's shell would: wall time, and CPU of everything it waited for. */
import { execFile } from "node:child_process";
import { seconds } from "./proc.js";

export interface Timed {
	wallS: number;
	/** User + system CPU seconds of the script's children (bash `times`), every thread of each included. */
	cpuS: number;
	stdout: string;
	error?: string;
}

export function timedBash(script: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Timed> {
	const started = performance.now();
	return new Promise((resolve) => {
		execFile(
			"bash",
			["-c", `${script}\nstatus=$?\ntimes\nexit $status`],
			{ env, timeout: timeoutMs, maxBuffer: 256 * 2 ** 20 },
			(error, stdout, stderr) => {
				const wallS = seconds(started);
				const lines = stdout.trim().split("\n");
				const children = lines.at(-1) ?? "";
				const cpuS = [...children.matchAll(/(\d+)m([\d.]+)s/g)].reduce(
					(s, m) => s + Number(m[1]) * 60 + Number(m[2]),
					0,
				);
				resolve({
					wallS,
					cpuS,
					stdout: lines.slice(0, -2).join("\n"),
					...(error ? { error: `${error.message.slice(0, 200)} ${stderr.slice(-500)}` } : {}),
				});
			},
		);
	});
}
