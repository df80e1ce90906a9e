#!/usr/bin/env node
/** The command line: the global options, then every command of the command table, made into commander commands. */
import { Command, CommanderError, Option } from "commander";
import { CertificateeError } from "../errors.js";
import { VERSION } from "../version.js";
import { COMMANDS, type CommandInput, type CommandSpec, GROUPS } from "./command-table.js";
import type { CommandContext, GlobalOptions } from "./context.js";
import { EXIT, ExitError } from "./exit.js";

type Action = (ctx: CommandContext, input: CommandInput) => Promise<void>;

export function buildProgram(run: (action: Action, input: CommandInput) => Promise<void>): Command {
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
				"fatal",
				"silent",
			]),
		)
		.option("--json", "machine-readable output")
		.exitOverride()
		.showHelpAfterError()
		.configureHelp({ showGlobalOptions: true });
	const groups = new Map<string, Command>();
	for (const spec of COMMANDS) {
		const [first = "", sub] = spec.name.split(" ");
		let parent = program;
		if (sub !== undefined) {
			parent = groups.get(first) ?? program.command(first).description(GROUPS[first] ?? "");
			groups.set(first, parent);
		}
		addCommand(parent.command(sub ?? first), spec, run);
	}
	return program;
}

/** One command of the table: its description, argument and options, and the action that runs it. */
function addCommand(
	command: Command,
	spec: CommandSpec,
	run: (action: Action, input: CommandInput) => Promise<void>,
): void {
	command.description(spec.description);
	if (spec.argument) command.argument(spec.argument.name, spec.argument.description);
	for (const option of spec.options ?? []) command.option(option.flags, option.description, option.default);
	if (spec.argument) {
		command.action((argument: string, options: Record<string, unknown>) =>
			run(spec.run, { argument, options }),
		);
	} else {
		command.action((options: Record<string, unknown>) => run(spec.run, { argument: "", options }));
	}
}

export async function main(argv: string[]): Promise<number> {
	let exitCode: number = EXIT.ok;
	const program = buildProgram(async (action, input) => {
		const { createContext } = await import("./context.js");
		const ctx = createContext(program.opts<GlobalOptions>());
		await action(ctx, input);
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
