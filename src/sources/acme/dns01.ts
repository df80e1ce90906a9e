/**
 * DNS-01 through an operator's script: `<argv...> set <name> <value>` before validation and
 * `<argv...> clear <name> <value>` after, so any DNS provider can be scripted. The hook gets the record name
 * (`_acme-challenge.example.com`, no trailing dot) and the TXT value; exit 0 means done.
 */
import { execFile } from "node:child_process";
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
	const [command, ...fixed] = argv as [string, ...string[]];
	return {
		run(action, name, value, signal) {
			return new Promise((resolve, reject) => {
				execFile(
					command,
					[...fixed, action, name, value],
					{ timeout: timeoutMs, signal, killSignal: "SIGKILL", maxBuffer: 1 << 20 },
					(error, _stdout, stderr) => {
						if (!error) return resolve();
						const e = error as NodeJS.ErrnoException & { killed?: boolean; code?: number | string };
						const why =
							e.killed && !signal.aborted
								? `timed out after ${timeoutMs} ms`
								: typeof e.code === "number"
									? `exited with status ${e.code}`
									: `could not run: ${e.code ?? e.message}`;
						const tail = scrubSecrets(String(stderr).trim()).slice(-500);
						reject(
							new CertificateeError(
								"HOOK_FAILED",
								`dns_hook ${action} ${name} ${why}${tail ? `: ${tail}` : ""}`,
								{
									context: { field: "dns_hook", operation: `dns-01 ${action}` },
									hint: "run the hook by hand with the same arguments; it must exit 0 once the TXT record is set/cleared",
									retryable: true,
									cause: error,
								},
							),
						);
					},
				);
			});
		},
	};
}
