/**
 * DNS-01 through an operator's script: `<argv...> set <name> <value>` before validation and
 * `<argv...> clear <name> <value>` after, so any DNS provider can be scripted. The hook gets the record name
 * (`_acme-challenge.example.com`, no trailing dot) and the TXT value; exit 0 means done. It runs like
 * on_change (src/base/command.ts): its own process group, an allow-listed environment, a bounded wait.
 */
import { runCommand } from "../../base/command.js";
import { CertificateeError, scrubSecrets } from "../../errors.js";

export type DnsHookAction = "set" | "clear";

export interface DnsHook {
	run(action: DnsHookAction, name: string, value: string, signal: AbortSignal): Promise<void>;
}

/** `_acme-challenge.` + the name without a wildcard label. */
export function dnsRecordName(domain: string): string {
	return `_acme-challenge.${domain.replace(/^\*\./, "")}`;
}

export function createDnsHook(argv: readonly string[], timeoutMs: number): DnsHook {
	return {
		async run(action, name, value, signal) {
			const result = await runCommand({ argv: [...argv, action, name, value], timeoutMs, signal });
			if (result.kind === "exited" && result.code === 0) return;
			const why =
				result.kind === "timed-out"
					? `timed out after ${timeoutMs} ms`
					: result.kind === "aborted"
						? "was stopped (certificatee is shutting down)"
						: result.kind === "exited"
							? `exited with status ${result.code}`
							: result.kind === "killed"
								? `was killed by ${result.signal}`
								: `could not run: ${(result.error as NodeJS.ErrnoException).code ?? result.error.message}`;
			const tail = "stderr" in result ? scrubSecrets(result.stderr).slice(-500) : "";
			throw new CertificateeError(
				"HOOK_FAILED",
				`dns_hook ${action} ${name} ${why}${tail ? `: ${tail}` : ""}`,
				{
					context: { field: "dns_hook", operation: `dns-01 ${action}` },
					hint: "run the hook by hand with the same arguments; it must exit 0 once the TXT record is set/cleared",
					retryable: true,
					...(result.kind === "not-started" ? { cause: result.error } : {}),
				},
			);
		},
	};
}
