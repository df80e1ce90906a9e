/** The on_change command: argv (no shell), bounded by a timeout, its failure returned as a value. */
import { spawn } from "node:child_process";
import { CertificateeError, scrubSecrets } from "../../errors.js";

export interface HookRun {
	command: string[];
	timeoutMs: number;
	/** Added to certificatee's environment. */
	env: Record<string, string>;
}

export type HookResult = { ok: true; durationMs: number } | { ok: false; error: CertificateeError };

const STDERR_TAIL = 2000;

export function runHook(run: HookRun): Promise<HookResult> {
	const [file, ...args] = run.command;
	const started = Date.now();
	const context = { operation: "on_change", field: "on_change.command" };
	return new Promise((resolve) => {
		const child = spawn(file ?? "", args, {
			env: { ...process.env, ...run.env },
			stdio: ["ignore", "ignore", "pipe"],
		});
		let stderr = "";
		let timedOut = false;
		child.stderr.on("data", (chunk: Buffer) => {
			stderr = (stderr + chunk.toString()).slice(-STDERR_TAIL);
		});
		const timer = setTimeout(() => {
			timedOut = true;
			child.kill("SIGTERM");
			setTimeout(() => child.kill("SIGKILL"), 5000).unref();
		}, run.timeoutMs);
		const fail = (message: string, cause?: unknown) =>
			resolve({
				ok: false,
				error: new CertificateeError("HOOK_FAILED", message, {
					context,
					hint: "the files were updated; fix the command: it runs again every cycle until it succeeds",
					retryable: true,
					cause,
				}),
			});
		child.on("error", (e) => {
			clearTimeout(timer);
			fail(`on_change command ${JSON.stringify(file)} could not start: ${e.message}`, e);
		});
		child.on("close", (code, signal) => {
			clearTimeout(timer);
			const tail = scrubSecrets(stderr.trim());
			const said = tail.length > 0 ? `: ${tail}` : "";
			if (timedOut) fail(`on_change command timed out after ${run.timeoutMs} ms${said}`);
			else if (code === 0) resolve({ ok: true, durationMs: Date.now() - started });
			else if (code !== null) fail(`on_change command exited with ${code}${said}`);
			else fail(`on_change command was killed by ${signal}${said}`);
		});
	});
}
