/** Child processes of the test harness (Pebble, challtestsrv, named): output kept, stopped cleanly. */
import { type ChildProcess, spawn } from "node:child_process";

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

export async function waitUntil(what: string, proc: Proc, probe: () => Promise<boolean>): Promise<void> {
	const deadline = Date.now() + 10_000;
	while (Date.now() < deadline) {
		if (proc.child.exitCode !== null) throw new Error(`${what} exited early:\n${proc.output()}`);
		if (await probe().catch(() => false)) return;
		await sleep(50);
	}
	throw new Error(`${what} not ready within 10 s:\n${proc.output()}`);
}
