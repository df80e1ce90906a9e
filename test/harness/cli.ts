/**
 * The built CLI (dist/cli/main.js) as a child process: one-shot commands with their exit code and output,
 * and the daemon (`run`) with its JSON log lines, for tests that drive certificatee the way an operator does.
 *
 *   await ensureBuilt();
 *   const r = await certificatee(["sync", "--once", "--config", file]);   // { code, stdout, stderr }
 *   const d = spawnCertificatee(["run", "--config", file]); await d.waitForLog(/cycle finished/); await d.stop();
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { scaled } from "./deadline.js";

const ROOT = join(import.meta.dirname, "../..");
export const CLI = join(ROOT, "dist/cli/main.js");
const run = promisify(execFile);

function newestMtime(dir: string): number {
	let newest = 0;
	for (const entry of readdirSync(dir, { withFileTypes: true })) {
		const path = join(dir, entry.name);
		newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
	}
	return newest;
}

/** Builds dist when it is missing or older than src (npm test builds first, so this is usually a no-op). */
export async function ensureBuilt(): Promise<void> {
	if (existsSync(CLI) && statSync(CLI).mtimeMs >= newestMtime(join(ROOT, "src"))) return;
	await run("npm", ["run", "build"], { cwd: ROOT });
}

export interface CliResult {
	code: number;
	stdout: string;
	stderr: string;
}

/** One command to completion. */
export async function certificatee(
	args: string[],
	options: {
		cwd?: string;
		env?: Record<string, string>;
		timeoutMs?: number;
		uid?: number;
		gid?: number;
	} = {},
): Promise<CliResult> {
	try {
		const r = await run(process.execPath, [CLI, ...args], {
			env: { ...process.env, NO_COLOR: "1", ...options.env },
			...(options.cwd ? { cwd: options.cwd } : {}),
			...(options.uid === undefined ? {} : { uid: options.uid }),
			...(options.gid === undefined ? {} : { gid: options.gid }),
			timeout: options.timeoutMs ?? scaled(30_000),
		});
		return { code: 0, stdout: r.stdout, stderr: r.stderr };
	} catch (e) {
		const err = e as { code: number; stdout: string; stderr: string };
		return { code: err.code, stdout: err.stdout, stderr: err.stderr };
	}
}

export interface LogLine {
	msg?: string;
	level?: number;
	[key: string]: unknown;
}

export interface Daemon {
	readonly child: ChildProcess;
	/** Parsed JSON log lines so far (stderr). */
	readonly logs: LogLine[];
	/** Resolves with the first log line (from index `from` on) whose msg matches. */
	waitForLog(pattern: RegExp, options?: { from?: number; timeoutMs?: number }): Promise<LogLine>;
	signal(name: NodeJS.Signals): void;
	/** Resolves with the exit code (null when killed by a signal). */
	readonly exited: Promise<number | null>;
	/** SIGKILL if still running; always safe to call. */
	stop(): Promise<void>;
}

export function spawnCertificatee(
	args: string[],
	options: { cwd?: string; env?: Record<string, string>; nodeArgs?: string[] } = {},
): Daemon {
	const child = spawn(process.execPath, [...(options.nodeArgs ?? []), CLI, ...args], {
		env: { ...process.env, NO_COLOR: "1", ...options.env },
		stdio: ["ignore", "pipe", "pipe"],
		...(options.cwd ? { cwd: options.cwd } : {}),
	});
	const logs: LogLine[] = [];
	const waiters = new Set<() => void>();
	let buffer = "";
	child.stderr?.on("data", (chunk: Buffer) => {
		buffer += chunk.toString("utf8");
		const lines = buffer.split("\n");
		buffer = lines.pop() ?? "";
		for (const line of lines) {
			if (line.trim() === "") continue;
			try {
				logs.push(JSON.parse(line) as LogLine);
			} catch {
				logs.push({ msg: line });
			}
		}
		for (const w of waiters) w();
	});
	child.stdout?.resume();
	const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
	let done = false;
	void exited.then(() => {
		done = true;
		for (const w of waiters) w();
	});
	return {
		child,
		logs,
		exited,
		signal: (name) => {
			child.kill(name);
		},
		waitForLog(pattern, { from = 0, timeoutMs = scaled(20_000) } = {}) {
			return new Promise((resolve, reject) => {
				const check = () => {
					const hit = logs.slice(from).find((l) => pattern.test(String(l.msg ?? "")));
					if (hit) {
						finish();
						resolve(hit);
					} else if (done) {
						finish();
						reject(new Error(`certificatee exited before logging ${pattern}:\n${JSON.stringify(logs)}`));
					}
				};
				const timer = setTimeout(() => {
					finish();
					reject(
						new Error(`no log line matching ${pattern} within ${timeoutMs} ms:\n${JSON.stringify(logs)}`),
					);
				}, timeoutMs);
				const finish = () => {
					clearTimeout(timer);
					waiters.delete(check);
				};
				waiters.add(check);
				check();
			});
		},
		async stop() {
			if (!done) {
				child.kill("SIGKILL");
				await exited;
			}
		},
	};
}
