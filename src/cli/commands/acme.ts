/** `certificatee acme rollover --source NAME`: a new ACME account key (RFC 8555 keyChange). */
import { CertificateeError } from "../../errors.js";
import { createAcmeIssuer } from "../../sources/acme/index.js";
import { openFileStore } from "../../store/file-store.js";
import type { CommandContext } from "../context.js";

export async function acmeRolloverCommand(ctx: CommandContext, options: { source?: string }): Promise<void> {
	const { config } = ctx.loadConfig();
	const sources = config.sources.flatMap((s) => (s.type === "acme" ? [s] : []));
	const chosen = options.source ? sources.find((s) => s.name === options.source) : sources[0];
	if (!chosen) {
		throw new CertificateeError(
			"CONFIG_INVALID",
			options.source ? `no acme source named "${options.source}"` : "no acme source is configured",
			{
				context: { field: "sources" },
				hint: `acme sources: ${sources.map((s) => s.name).join(", ") || "none"}`,
			},
		);
	}
	// The lock keeps a running daemon (which holds the account key in memory) from ordering with the old key.
	const store = await openFileStore(config.state_dir);
	const issuer = createAcmeIssuer(chosen, { store, logger: ctx.log });
	try {
		const account = await issuer.rolloverKey(AbortSignal.timeout(120_000));
		ctx.out(
			ctx.options.json
				? JSON.stringify({ source: chosen.name, account })
				: `${chosen.name}: account key rolled over (${account})`,
		);
	} finally {
		await issuer.close();
		store.close();
	}
}
