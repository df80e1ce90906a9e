/** `certificatee demo` (the embedded default) and `certificatee ca export`. */
import { runDemo } from "../../demo/index.js";
import { CertificateeError } from "../../errors.js";
import { createLocalCaIssuer } from "../../sources/local-ca/index.js";
import type { CommandContext } from "../context.js";

export async function demoCommand(
	ctx: CommandContext,
	options: { stateDir?: string; lifetime?: string },
): Promise<void> {
	await runDemo({
		stateDir: options.stateDir ?? "./.certificatee-demo",
		...(options.lifetime ? { lifetime: options.lifetime } : {}),
		log: ctx.log,
		out: ctx.out,
		signals: process,
	});
}

export async function caExportCommand(ctx: CommandContext, options: { source?: string }): Promise<void> {
	const { config } = ctx.loadConfig();
	const cas = config.sources.filter((s) => s.type === "local-ca");
	const chosen = options.source ? cas.find((s) => s.name === options.source) : cas[0];
	if (chosen?.type !== "local-ca") {
		throw new CertificateeError(
			"CONFIG_INVALID",
			options.source ? `no local-ca source named "${options.source}"` : "no local-ca source is configured",
			{
				context: { field: "sources" },
				hint: `local-ca sources: ${cas.map((s) => s.name).join(", ") || "none"}`,
			},
		);
	}
	ctx.out((await createLocalCaIssuer(chosen, { stateDir: config.state_dir }).exportRoot()).trimEnd());
}
