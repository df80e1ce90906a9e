/**
 * `validate --online`: every address in the configuration contacted once, each reported ok or with its
 * error. Each kind declares its checks (its folder's online.ts, listed by the registries): a runtime socket
 * (`show info`), a Data Plane API endpoint (auth and `/v3/info`, then the storage listing), a probe address (a
 * TLS handshake), an ACME directory (GET). A failure is a value; the checks run concurrently and one never
 * stops another.
 */
import type { OnlineCheck } from "../../base/online.js";
import type { Config } from "../../config/schema.js";
import { describeError, isCertificateeError } from "../../errors.js";
import { sourceOnlineChecks } from "../../sources/registry.js";
import { targetOnlineChecks } from "../../targets/registry.js";

export type { OnlineCheck } from "../../base/online.js";

/** Runs every check at once, each bounded by `timeoutMs`. */
export async function runOnlineChecks(config: Config, timeoutMs = 30_000): Promise<OnlineCheck[]> {
	return Promise.all(
		[
			...targetOnlineChecks(config.targets, config),
			...(await sourceOnlineChecks(config.sources, config)),
		].map(async ({ run, hint, ...check }): Promise<OnlineCheck> => {
			try {
				const answer = await run(AbortSignal.timeout(timeoutMs));
				return typeof answer === "string"
					? { ...check, ok: true, detail: answer }
					: { ...check, ok: true, detail: answer.detail, warnings: answer.warnings };
			} catch (e) {
				const error: OnlineCheck["error"] = isCertificateeError(e)
					? { code: e.code, message: e.message, hint: e.hint ?? hint }
					: { code: "ENDPOINT_UNAVAILABLE", message: describeError(e), hint };
				return { ...check, ok: false, error };
			}
		}),
	);
}
