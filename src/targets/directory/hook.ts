/** The on_change command: argv (no shell), bounded by a timeout, its failure returned as a value. */
import { runCommand } from "../../base/command.js";
import { CertificateeError, scrubSecrets } from "../../errors.js";

export interface HookRun {
	command: string[];
	timeoutMs: number;
	/** The documented CERTIFICATEE_* facts, added to the allow-listed environment (src/base/command.ts). */
	env: Record<string, string>;
}

export type HookResult = { ok: true; durationMs: number } | { ok: false; error: CertificateeError };

export async function runHook(run: HookRun): Promise<HookResult> {
	const file = run.command[0];
	const result = await runCommand({ argv: run.command, timeoutMs: run.timeoutMs, env: run.env });
	if (result.kind === "exited" && result.code === 0) return { ok: true, durationMs: result.durationMs };
	const fail = (message: string, cause?: unknown): HookResult => ({
		ok: false,
		error: new CertificateeError("HOOK_FAILED", message, {
			context: { operation: "on_change", field: "on_change.command" },
			hint: "the files were updated; fix the command: it runs again every cycle until it succeeds",
			retryable: true,
			cause,
		}),
	});
	if (result.kind === "not-started") {
		return fail(
			`on_change command ${JSON.stringify(file)} could not start: ${result.error.message}`,
			result.error,
		);
	}
	const tail = scrubSecrets(result.stderr);
	const said = tail.length > 0 ? `: ${tail}` : "";
	switch (result.kind) {
		case "timed-out":
		case "aborted":
			return fail(`on_change command timed out after ${run.timeoutMs} ms${said}`);
		case "exited":
			return fail(`on_change command exited with ${result.code}${said}`);
		case "killed":
			return fail(`on_change command was killed by ${result.signal}${said}`);
	}
}
