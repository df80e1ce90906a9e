#!/usr/bin/env node
/**
 * The command line. Each command's module (and what it pulls in: the config schemas, the ACME client, the HTTP
 * client, the targets) is imported when that command runs, so `--version`, `--help` and a bad flag answer at once.
 */
import { Command, CommanderError, Option } from "commander";
import { CertificateeError } from "../errors.js";
import { VERSION } from "../version.js";
import type { CommandContext, GlobalOptions } from "./context.js";
import { EXIT, ExitError } from "./exit.js";

const load = {
	acme: () => import("./commands/acme.js"),
	cycle: () => import("./commands/cycle.js"),
	demo: () => import("./commands/demo.js"),
	health: () => import("./commands/health.js"),
	renew: () => import("./commands/renew.js"),
	replace: () => import("./commands/replace.js"),
	run: () => import("./commands/run.js"),
	validate: () => import("./commands/validate.js"),
};

type Action = (ctx: CommandContext, options: Record<string, unknown>) => Promise<void>;

export function buildProgram(
	run: (action: Action, options: Record<string, unknown>) => Promise<void>,
): Command {
	const program = new Command("certificatee")
		.description("Keeps TLS certificates on HAProxy fleets and in directories valid, renewed and converged.")
		.version(VERSION, "-V, --version", "print the version")
		.addOption(
			new Option(
				"-c, --config <file>",
				"configuration file (default ./certificatee.yaml or $CERTIFICATEE_CONFIG)",
			),
		)
		.addOption(
			new Option("--log-level <level>", "log level").choices([
				"trace",
				"debug",
				"info",
				"warn",
				"error",
				"silent",
			]),
		)
		.option("--json", "machine-readable output")
		.exitOverride()
		.showHelpAfterError()
		.configureHelp({ showGlobalOptions: true });

	const commands: Array<[string, string, Action, (c: Command) => Command]> = [
		[
			"validate",
			"check the configuration and every source's certificates",
			async (ctx, o) =>
				(await load.validate()).validateCommand(ctx, {
					configOnly: o.configOnly === true,
					online: o.online === true,
				}),
			(c) =>
				c
					.option(
						"--config-only",
						"fail only on the configuration; report source-file problems as warnings (the daemon skips such files)",
					)
					.option(
						"--online",
						"also contact every runtime socket, Data Plane API, probe address and ACME directory (exit 1 if one fails)",
					),
		],
		[
			"plan",
			"show what a sync would do, writing nothing (exit 2 when changes are pending)",
			async (ctx) => (await load.cycle()).planCommand(ctx),
			(c) => c,
		],
		[
			"sync",
			"run one full cycle and exit",
			async (ctx) => (await load.cycle()).syncCommand(ctx),
			(c) => c.option("--once", "one cycle (the default)"),
		],
		[
			"status",
			"show every certificate, endpoint and ref, read live",
			async (ctx, o) =>
				(await load.cycle()).statusCommand(
					ctx,
					typeof o.endpoint === "string" ? { endpoint: o.endpoint } : {},
				),
			(c) => c.option("--endpoint <name>", "per-endpoint detail"),
		],
		[
			"run",
			"run the daemon: a cycle every interval, metrics and health on listen",
			async (ctx) => (await load.run()).runCommand(ctx),
			(c) => c,
		],
		[
			"demo",
			"run on the embedded default: a local CA, a directory and (when installed) a real HAProxy on loopback",
			async (ctx, o) =>
				(await load.demo()).demoCommand(ctx, {
					...(typeof o.stateDir === "string" ? { stateDir: o.stateDir } : {}),
					...(typeof o.lifetime === "string" ? { lifetime: o.lifetime } : {}),
				}),
			(c) =>
				c
					.option(
						"--state-dir <dir>",
						"where the demo keeps its CA, certificates and HAProxy",
						"./.certificatee-demo",
					)
					.option("--lifetime <duration>", "certificate lifetime (renewal at 1/3 left)", "90s"),
		],
		[
			"health",
			"ask the running daemon's /healthz (--ready: /readyz) on the configured listen address; exit 1 unless 200",
			async (ctx, o) => (await load.health()).healthCommand(ctx, { ready: o.ready === true }),
			(c) => c.option("--ready", "ask /readyz instead of /healthz"),
		],
		["version", "print the version", async (ctx) => ctx.out(VERSION), (c) => c],
	];
	program
		.command("ca")
		.description("the local CA")
		.command("export")
		.description("print a local-ca source's root certificate (PEM) for clients to trust")
		.option("--source <name>", "which local-ca source (default: the first)")
		.action((opts: Record<string, unknown>) =>
			run(
				async (ctx) =>
					(await load.demo()).caExportCommand(
						ctx,
						typeof opts.source === "string" ? { source: opts.source } : {},
					),
				opts,
			),
		);
	program
		.command("acme")
		.description("the ACME account")
		.command("rollover")
		.description("replace the ACME account key (RFC 8555 keyChange); stop the daemon first")
		.option("--source <name>", "which acme source (default: the first)")
		.action((opts: Record<string, unknown>) =>
			run(
				async (ctx) =>
					(await load.acme()).acmeRolloverCommand(
						ctx,
						typeof opts.source === "string" ? { source: opts.source } : {},
					),
				opts,
			),
		);
	program
		.command("renew")
		.description("order a certificate now and push it (--force: clear its backoff and daily cap first)")
		.argument("<name>", "the certificates[].name")
		.option("--force", "order even while backing off or capped; clears both for this certificate")
		.option(
			"--wait <duration>",
			"with the daemon running: how long to wait for it to serve the request",
			"10m",
		)
		.action((name: string, opts: Record<string, unknown>) =>
			run(
				async (ctx) =>
					(await load.renew()).renewCommand(ctx, name, {
						force: opts.force === true,
						...(typeof opts.wait === "string" ? { wait: opts.wait } : {}),
					}),
				opts,
			),
		);
	program
		.command("replace")
		.description(
			"serve and push a deliberate replacement that expires earlier (a key compromise, a CA change): lifts never-downgrade for that certificate, logged as an audit line",
		)
		.argument("<name>", "the certificate: a directory source's file stem or a certificates[].name")
		.option(
			"--file <file>",
			"PEM file holding the replacement certificate (default: the certificate's source file, or its newest issued one)",
		)
		.option("--reason <text>", "why (required; it goes into the audit line and status)")
		.option(
			"--wait <duration>",
			"with the daemon running: how long to wait for it to serve the replacement",
			"10m",
		)
		.action((name: string, opts: Record<string, unknown>) =>
			run(
				async (ctx) =>
					(await load.replace()).replaceCommand(ctx, name, {
						...(typeof opts.file === "string" ? { file: opts.file } : {}),
						...(typeof opts.reason === "string" ? { reason: opts.reason } : {}),
						...(typeof opts.wait === "string" ? { wait: opts.wait } : {}),
					}),
				opts,
			),
		);
	program
		.command("revoke")
		.description("revoke a certificate through its issuer, then order a new one and push it")
		.argument("<name>", "the certificates[].name")
		.option(
			"--reason <reason>",
			"unspecified, keyCompromise, affiliationChanged, superseded, cessationOfOperation",
			"unspecified",
		)
		.option(
			"--wait <duration>",
			"with the daemon running: how long to wait for it to serve the request",
			"10m",
		)
		.action((name: string, opts: Record<string, unknown>) =>
			run(
				async (ctx) =>
					(await load.renew()).revokeCommand(ctx, name, {
						...(typeof opts.reason === "string" ? { reason: opts.reason } : {}),
						...(typeof opts.wait === "string" ? { wait: opts.wait } : {}),
					}),
				opts,
			),
		);
	for (const [name, description, action, extra] of commands) {
		extra(program.command(name).description(description)).action((opts: Record<string, unknown>) =>
			run(action, opts),
		);
	}
	return program;
}

export async function main(argv: string[]): Promise<number> {
	let exitCode: number = EXIT.ok;
	const program = buildProgram(async (action, options) => {
		const { createContext } = await import("./context.js");
		const ctx = createContext(program.opts<GlobalOptions>());
		await action(ctx, options);
	});
	try {
		await program.parseAsync(argv);
	} catch (e) {
		if (e instanceof CommanderError) {
			exitCode = e.exitCode === 0 ? EXIT.ok : EXIT.error;
		} else if (e instanceof ExitError) {
			if (e.message) process.stderr.write(`certificatee: ${e.message}\n`);
			exitCode = e.exitCode;
		} else {
			process.stderr.write(`certificatee: ${formatError(e)}\n`);
			exitCode = EXIT.error;
		}
	}
	return exitCode;
}

/** A human line for an error: its code and message, then the hint. */
function formatError(e: unknown): string {
	if (e instanceof CertificateeError) {
		const line = `${e.code}: ${e.message}`;
		return e.hint ? `${line}\n  hint: ${e.hint}` : line;
	}
	return e instanceof Error ? e.message : String(e);
}

const code = await main(process.argv);
process.exitCode = code;
