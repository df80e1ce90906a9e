/**
 * An operator's command (on_change, dns_hook): argv without a shell, an allow-listed environment, and a
 * timeout that bounds the wait whatever the command leaves behind (issue 25, findings 4 and 6).
 *
 * - It runs in its own process group; at the timeout the whole group gets SIGTERM, then SIGKILL 5 s later,
 *   so a grandchild (`sleep 25 &`) cannot outlive the deadline.
 * - The run ends when the command exits, not when its pipes close: a grandchild that keeps stderr open no
 *   longer holds the caller (`sh -c "sleep 25 & exit 0"` waited 25 s and was reported as timed out).
 * - The environment is PATH, HOME, the locale, TZ, TMPDIR, USER/LOGNAME and what the caller passes (the
 *   documented CERTIFICATEE_* facts). Never certificatee's own: it holds CERTIFICATEE_ENCRYPTION_KEY and the
 *   variables the configuration interpolates (${DPAPI_PASSWORD}).
 */
import { spawn } from "node:child_process";

/** Variables passed through from certificatee's environment, by name or prefix. */
const PASSED = ["PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "USER", "LOGNAME"];
const PASSED_PREFIX = "LC_";
const KILL_AFTER_MS = 5_000;
const STDERR_TAIL = 2_000;
/** After the exit, how long stderr may take to drain (a grandchild holding it open is not waited for). */
const DRAIN_MS = 200;

export interface CommandRun {
	argv: readonly string[];
	timeoutMs: number;
	/** Added to the allow-listed environment. */
	env?: Record<string, string>;
	signal?: AbortSignal;
}

export type CommandResult =
	| { kind: "exited"; code: number; stderr: string; durationMs: number }
	| { kind: "killed"; signal: string; stderr: string }
	| { kind: "timed-out"; stderr: string }
	| { kind: "aborted"; stderr: string }
	| { kind: "not-started"; error: Error };

/** The environment a command gets: the allow-list from `from`, plus `extra`. */
export function commandEnvironment(
	from: NodeJS.ProcessEnv,
	extra: Record<string, string> = {},
): Record<string, string> {
	const env: Record<string, string> = {};
	for (const [name, value] of Object.entries(from)) {
		if (value === undefined) continue;
		if (PASSED.includes(name) || name.startsWith(PASSED_PREFIX)) env[name] = value;
	}
	return { ...env, ...extra };
}

export function runCommand(run: CommandRun): Promise<CommandResult> {
	const [file, ...args] = run.argv;
	const started = Date.now();
	return new Promise((resolve) => {
		const child = spawn(file ?? "", args, {
			env: commandEnvironment(process.env, run.env),
			stdio: ["ignore", "ignore", "pipe"],
			detached: true,
		});
		let stderr = "";
		let ending: "timed-out" | "aborted" | undefined;
		let killer: NodeJS.Timeout | undefined;
		child.stderr.on("data", (chunk: Buffer) => {
			stderr = (stderr + chunk.toString()).slice(-STDERR_TAIL);
		});
		const killGroup = (signal: NodeJS.Signals) => {
			try {
				if (child.pid !== undefined) process.kill(-child.pid, signal);
			} catch {
				// The group is gone already.
			}
		};
		const stop = (why: "timed-out" | "aborted") => {
			ending ??= why;
			killGroup("SIGTERM");
			killer ??= setTimeout(() => killGroup("SIGKILL"), KILL_AFTER_MS);
			killer.unref();
		};
		const timer = setTimeout(() => stop("timed-out"), run.timeoutMs);
		const onAbort = () => stop("aborted");
		run.signal?.addEventListener("abort", onAbort, { once: true });
		let resolved = false;
		const done = (result: CommandResult) => {
			if (resolved) return;
			resolved = true;
			clearTimeout(timer);
			run.signal?.removeEventListener("abort", onAbort);
			// What a grandchild still holds open is not waited for.
			child.stderr.destroy();
			resolve(result);
		};
		child.on("error", (error) => done({ kind: "not-started", error }));
		let closed = false;
		child.stderr.on("close", () => {
			closed = true;
		});
		child.on("exit", (code, signal) => {
			const durationMs = Date.now() - started;
			// After a timeout the leftovers of the group are killed too (SIGKILL follows if SIGTERM is ignored).
			if (ending !== undefined) killGroup("SIGTERM");
			const finish = () => {
				const tail = stderr.trim();
				if (ending !== undefined) done({ kind: ending, stderr: tail });
				else if (code !== null) done({ kind: "exited", code, stderr: tail, durationMs });
				else done({ kind: "killed", signal: signal ?? "unknown", stderr: tail });
			};
			if (closed) return finish();
			const drained = setTimeout(finish, DRAIN_MS);
			child.stderr.once("close", () => {
				clearTimeout(drained);
				finish();
			});
		});
	});
}
