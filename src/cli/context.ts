/** What every command gets: parsed global options, a logger, the config loader and an output sink. */

import { defaultConfigPath, type LoadedConfig, loadConfigFile } from "../config/load.js";
import { createLogger, type Logger } from "../log.js";

export interface GlobalOptions {
	config?: string;
	logLevel?: string;
	json?: boolean;
}

export interface CommandContext {
	options: GlobalOptions;
	log: Logger;
	/** Writes a line to stdout (the command's result; logs go to stderr). */
	out(line: string): void;
	loadConfig(): LoadedConfig;
	env: NodeJS.ProcessEnv;
}

export function createContext(options: GlobalOptions, env: NodeJS.ProcessEnv = process.env): CommandContext {
	// --log-level, else $CERTIFICATEE_LOG_LEVEL, else the file's log_level (applied as each load reads it, so a
	// SIGHUP that changes it takes effect), else info.
	const chosen = options.logLevel ?? env.CERTIFICATEE_LOG_LEVEL;
	const log = createLogger({ level: chosen ?? "info" });
	return {
		options,
		log,
		env,
		out: (line) => process.stdout.write(`${line}\n`),
		loadConfig: () => {
			const loaded = loadConfigFile(options.config ?? defaultConfigPath(env), env);
			if (chosen === undefined) log.level = loaded.config.log_level;
			return loaded;
		},
	};
}
