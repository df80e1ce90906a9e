/**
 * Every command, declared once: its name, what it takes and what runs it. A command's module (and what it pulls in:
 * the config schemas, the ACME client, the HTTP client, the targets) is imported only when that command runs, so
 * `--version`, `--help` and a bad flag answer at once.
 */
import { VERSION } from "../version.js";
import type { CommandContext } from "./context.js";

export interface OptionSpec {
	flags: string;
	description: string;
	default?: string;
}

/** What commander parsed for one command: its argument (when it takes one) and its options. */
export interface CommandInput {
	argument: string;
	options: Record<string, unknown>;
}

export interface CommandSpec {
	/** `validate`, or `ca export` for a command inside a group. */
	name: string;
	description: string;
	argument?: { name: string; description: string };
	options?: readonly OptionSpec[];
	run(ctx: CommandContext, input: CommandInput): Promise<void>;
}

/** The groups that hold commands (`ca export`), with their own help line. */
export const GROUPS: Readonly<Record<string, string>> = {
	ca: "the local CA",
	acme: "the ACME account",
};

/** The options among `keys` that commander parsed as text; an option left out stays out. */
function texts<K extends string>(options: Record<string, unknown>, ...keys: K[]): Partial<Record<K, string>> {
	const picked: Partial<Record<K, string>> = {};
	for (const key of keys) {
		const value = options[key];
		if (typeof value === "string") picked[key] = value;
	}
	return picked;
}

const WAIT_FOR_REQUEST: OptionSpec = {
	flags: "--wait <duration>",
	description: "with the daemon running: how long to wait for it to serve the request",
	default: "10m",
};

/** In the order `--help` lists them. */
export const COMMANDS: readonly CommandSpec[] = [
	{
		name: "ca export",
		description: "print a local-ca source's root certificate (PEM) for clients to trust",
		options: [{ flags: "--source <name>", description: "which local-ca source (default: the first)" }],
		run: async (ctx, { options }) =>
			(await import("./commands/demo.js")).caExportCommand(ctx, texts(options, "source")),
	},
	{
		name: "acme rollover",
		description: "replace the ACME account key (RFC 8555 keyChange); stop the daemon first",
		options: [{ flags: "--source <name>", description: "which acme source (default: the first)" }],
		run: async (ctx, { options }) =>
			(await import("./commands/acme.js")).acmeRolloverCommand(ctx, texts(options, "source")),
	},
	{
		name: "renew",
		description: "order a certificate now and push it (--force: clear its backoff and daily cap first)",
		argument: { name: "<name>", description: "the certificates[].name" },
		options: [
			{
				flags: "--force",
				description: "order even while backing off or capped; clears both for this certificate",
			},
			WAIT_FOR_REQUEST,
		],
		run: async (ctx, { argument, options }) =>
			(await import("./commands/renew.js")).renewCommand(ctx, argument, {
				force: options.force === true,
				...texts(options, "wait"),
			}),
	},
	{
		name: "replace",
		description:
			"serve and push a deliberate replacement that expires earlier (a key compromise, a CA change): lifts never-downgrade for that certificate, logged as an audit line",
		argument: {
			name: "<name>",
			description: "the certificate: a directory source's file stem or a certificates[].name",
		},
		options: [
			{
				flags: "--file <file>",
				description:
					"PEM file holding the replacement certificate (default: the certificate's source file, or its newest issued one)",
			},
			{ flags: "--reason <text>", description: "why (required; it goes into the audit line and status)" },
			{
				flags: "--wait <duration>",
				description: "with the daemon running: how long to wait for it to serve the replacement",
				default: "10m",
			},
		],
		run: async (ctx, { argument, options }) =>
			(await import("./commands/replace.js")).replaceCommand(
				ctx,
				argument,
				texts(options, "file", "reason", "wait"),
			),
	},
	{
		name: "revoke",
		description: "revoke a certificate through its issuer, then order a new one and push it",
		argument: { name: "<name>", description: "the certificates[].name" },
		options: [
			{
				flags: "--reason <reason>",
				description: "unspecified, keyCompromise, affiliationChanged, superseded, cessationOfOperation",
				default: "unspecified",
			},
			WAIT_FOR_REQUEST,
		],
		run: async (ctx, { argument, options }) =>
			(await import("./commands/renew.js")).revokeCommand(ctx, argument, texts(options, "reason", "wait")),
	},
	{
		name: "validate",
		description: "check the configuration and every source's certificates",
		options: [
			{
				flags: "--config-only",
				description:
					"fail only on the configuration; report source-file problems as warnings (the daemon skips such files)",
			},
			{
				flags: "--online",
				description:
					"also contact every runtime socket, Data Plane API, probe address and ACME directory (exit 1 if one fails)",
			},
		],
		run: async (ctx, { options }) =>
			(await import("./commands/validate.js")).validateCommand(ctx, {
				configOnly: options.configOnly === true,
				online: options.online === true,
			}),
	},
	{
		name: "plan",
		description: "show what a sync would do, writing nothing (exit 2 when changes are pending)",
		run: async (ctx) => (await import("./commands/cycle.js")).planCommand(ctx),
	},
	{
		name: "sync",
		description: "run one full cycle and exit",
		options: [{ flags: "--once", description: "one cycle (the default)" }],
		run: async (ctx) => (await import("./commands/cycle.js")).syncCommand(ctx),
	},
	{
		name: "status",
		description: "show every certificate, endpoint and ref, read live",
		options: [{ flags: "--endpoint <name>", description: "per-endpoint detail" }],
		run: async (ctx, { options }) =>
			(await import("./commands/cycle.js")).statusCommand(ctx, texts(options, "endpoint")),
	},
	{
		name: "run",
		description: "run the daemon: a cycle every interval, metrics and health on listen",
		run: async (ctx) => (await import("./commands/run.js")).runCommand(ctx),
	},
	{
		name: "demo",
		description:
			"run on the embedded default: a local CA, a directory and (when installed) a real HAProxy on loopback",
		options: [
			{
				flags: "--state-dir <dir>",
				description: "where the demo keeps its CA, certificates and HAProxy",
				default: "./.certificatee-demo",
			},
			{
				flags: "--lifetime <duration>",
				description: "certificate lifetime (renewal at 1/3 left)",
				default: "90s",
			},
		],
		run: async (ctx, { options }) =>
			(await import("./commands/demo.js")).demoCommand(ctx, texts(options, "stateDir", "lifetime")),
	},
	{
		name: "health",
		description:
			"ask the running daemon's /healthz (--ready: /readyz) on the configured listen address; exit 1 unless 200",
		options: [{ flags: "--ready", description: "ask /readyz instead of /healthz" }],
		run: async (ctx, { options }) =>
			(await import("./commands/health.js")).healthCommand(ctx, { ready: options.ready === true }),
	},
	{
		name: "version",
		description: "print the version",
		run: async (ctx) => ctx.out(VERSION),
	},
];
