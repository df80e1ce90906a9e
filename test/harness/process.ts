/** Child processes of the test harness (Pebble, challtestsrv, named): output kept, stopped cleanly. */
import { type ChildProcess, spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { scaled } from "./deadline.js";

export interface Proc {
	child: ChildProcess;
	output: () => string;
	exited: Promise<void>;
}

export function startProcess(
	command: string,
	args: string[],
	options: { cwd: string; env: NodeJS.ProcessEnv },
): Proc {
	const child = spawn(command, args, {
		cwd: options.cwd,
		env: options.env,
		stdio: ["ignore", "pipe", "pipe"],
	});
	let out = "";
	child.stdout?.on("data", (d: Buffer) => {
		out += d.toString();
	});
	child.stderr?.on("data", (d: Buffer) => {
		out += d.toString();
	});
	const exited = new Promise<void>((resolve) => {
		if (child.exitCode !== null) resolve();
		child.once("exit", () => resolve());
		child.once("error", () => resolve());
	});
	return { child, output: () => out, exited };
}

export async function stopProcess(proc: Proc | undefined): Promise<void> {
	if (!proc || proc.child.exitCode !== null || proc.child.signalCode !== null) return;
	proc.child.kill("SIGTERM");
	const timer = setTimeout(() => proc.child.kill("SIGKILL"), 2000);
	await proc.exited;
	clearTimeout(timer);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `probe` answers true: 15 s on an idle machine, stretched with the load (deadline.ts). */
export async function waitUntil(what: string, proc: Proc, probe: () => Promise<boolean>): Promise<void> {
	const waitMs = scaled(15_000);
	const deadline = Date.now() + waitMs;
	while (Date.now() < deadline) {
		if (proc.child.exitCode !== null) throw new Error(`${what} exited early:\n${proc.output()}`);
		if (await probe().catch(() => false)) return;
		await sleep(50);
	}
	throw new Error(`${what} not ready within ${Math.round(waitMs / 1000)} s:\n${proc.output()}`);
}

/** The scheduler state of every thread of `pid` ("R", "S", "T", ...); empty once the process is gone. */
async function threadStates(pid: number): Promise<string[]> {
	const tasks = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
	const states = await Promise.all(
		tasks.map(async (t) => {
			const stat = await readFile(`/proc/${pid}/task/${t}/stat`, "utf8").catch(() => "");
			// "pid (comm) S ...": the state follows the last ")" (comm may hold spaces or parentheses).
			return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
		}),
	);
	return states.filter((s) => s !== "");
}

/**
 * SIGSTOP, and resolves once every thread of the process has stopped. kill() only queues the signal: one thread
 * takes it and stops the others, and on a loaded machine the process's other threads go on running (answering
 * requests) until that thread gets a CPU. A test that freezes a process and then expects silence waits here.
 */
export async function freeze(child: ChildProcess, timeoutMs = 10_000): Promise<void> {
	const pid = child.pid;
	if (pid === undefined) throw new Error("freeze: the process never started");
	child.kill("SIGSTOP");
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const states = await threadStates(pid);
		if (states.length > 0 && states.every((s) => s === "T")) return;
		if (states.length === 0) throw new Error(`freeze: process ${pid} is gone`);
		if (Date.now() > deadline)
			throw new Error(`freeze: process ${pid} not stopped within ${timeoutMs} ms: ${states.join("")}`);
		await sleep(5);
	}
}
