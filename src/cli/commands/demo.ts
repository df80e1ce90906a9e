/** `certificatee demo` (the embedded default) and `certificatee ca export`. */
import { accessSync, constants } from "node:fs";
import { delimiter, isAbsolute, join, relative } from "node:path";
import { runDemo } from "../../demo/index.js";
import { CertificateeError, isCertificateeError } from "../../errors.js";
import { createLocalCaIssuer } from "../../sources/local-ca/index.js";
import { type FileStore, openFileStore } from "../../store/file-store.js";
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
		command: howToRun(ctx.env),
	});
}

/**
 * How the operator runs this CLI again from here: `certificatee` when it is on PATH, else the way this process
 * was started (`node dist/cli/main.js` after ./scripts/demo.sh), so every line the demo prints works as shown.
 */
function howToRun(env: NodeJS.ProcessEnv): string {
	for (const dir of (env.PATH ?? "").split(delimiter)) {
		if (dir === "") continue;
		try {
			accessSync(join(dir, "certificatee"), constants.X_OK);
			return "certificatee";
		} catch {
			// Not there.
		}
	}
	const script = process.argv[1] ?? "dist/cli/main.js";
	const shown =
		isAbsolute(script) && !relative(process.cwd(), script).startsWith("..")
			? relative(process.cwd(), script)
			: script;
	return `node ${shown}`;
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
	const { store, shared } = await openStateForExport(config.state_dir);
	try {
		ctx.out((await createLocalCaIssuer(chosen, { store }).exportRoot()).trimEnd());
	} catch (e) {
		if (!shared || !isCertificateeError(e, "STATE_LOCKED")) throw e;
		throw new CertificateeError(
			"STATE_LOCKED",
			`local CA "${chosen.name}" does not exist yet, and a running certificatee holds ${config.state_dir}`,
			{
				context: { field: "sources", operation: "ca export" },
				hint: "the daemon creates it when it first signs a certificate; or stop it and run ca export again",
			},
		);
	} finally {
		store.close();
	}
}

/** The state store, locked; beside a running daemon (which holds the lock), read-only. */
async function openStateForExport(stateDir: string): Promise<{ store: FileStore; shared: boolean }> {
	try {
		return { store: await openFileStore(stateDir), shared: false };
	} catch (e) {
		if (!isCertificateeError(e, "STATE_LOCKED")) throw e;
		return { store: await openFileStore(stateDir, { readOnly: true }), shared: true };
	}
}
