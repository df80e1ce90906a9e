#!/usr/bin/env node
import "reflect-metadata";
import { Command, CommanderError, Option } from "commander";
import { VERSION } from "../version.js";
import { validateCommand } from "./commands/validate.js";
import { type CommandContext, createContext, formatError, type GlobalOptions } from "./context.js";
import { EXIT, ExitError } from "./exit.js";

type Action = (ctx: CommandContext, options: Record<string, unknown>) => Promise<void>;

function notYet(what: string): Action {
	return async () => {
		throw new ExitError(EXIT.error, `certificatee ${what} is not available in this build yet`);
	};
}

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
		.showHelpAfterError();

	const commands: Array<[string, string, Action, (c: Command) => Command]> = [
		[
			"validate",
			"check the configuration and every source's certificates",
			(ctx) => validateCommand(ctx),
			(c) => c,
		],
		[
			"plan",
			"show what a sync would do, writing nothing (exit 2 when changes are pending)",
			notYet("plan"),
			(c) => c,
		],
		[
			"sync",
			"run one full cycle and exit",
			notYet("sync"),
			(c) => c.option("--once", "one cycle (the default)"),
		],
		["status", "show every certificate, endpoint and ref, read live", notYet("status"), (c) => c],
		["run", "run the daemon: a cycle every interval, metrics and health on listen", notYet("run"), (c) => c],
		["version", "print the version", async (ctx) => ctx.out(VERSION), (c) => c],
	];
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

const code = await main(process.argv);
process.exitCode = code;
