/** Reading the configuration file: YAML, then secrets and environment, then the schema. */
import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { parseDocument } from "yaml";
import { CertificateeError } from "../errors.js";
import { formatPath, type InterpolateProblem, interpolate } from "./interpolate.js";
import { type Config, configSchema, referenceProblems } from "./schema.js";

export interface ConfigProblem {
	path: string;
	message: string;
}

export interface LoadedConfig {
	config: Config;
	/** The file it came from, or "(embedded default)". */
	file: string;
}

export function defaultConfigPath(env: NodeJS.ProcessEnv = process.env): string {
	return env.CERTIFICATEE_CONFIG ?? "./certificatee.yaml";
}

/** Validates an already-parsed tree. Relative paths in the config are resolved against `baseDir`. */
export function parseConfig(
	raw: unknown,
	file: string,
	options: { env?: NodeJS.ProcessEnv; baseDir?: string } = {},
): LoadedConfig {
	const problems: ConfigProblem[] = [];
	const interpolated = interpolate(raw ?? {}, options.env ?? process.env, problems as InterpolateProblem[]);
	const parsed = configSchema.safeParse(interpolated);
	problems.push(...referenceProblems(interpolated));
	if (!parsed.success) {
		for (const issue of parsed.error.issues)
			if (issue.code === "unrecognized_keys") {
				for (const key of issue.keys) {
					problems.push({ path: formatPath([...issue.path, key]), message: "unknown key (a typo?)" });
				}
			} else problems.push({ path: formatPath(issue.path), message: issue.message });
	}
	if (problems.length > 0 || !parsed.success) throw configError(file, problems);
	const config = parsed.data;
	if (options.baseDir !== undefined && !isAbsolute(config.state_dir)) {
		config.state_dir = resolve(options.baseDir, config.state_dir);
	}
	return { config, file };
}

export function configError(file: string, problems: ConfigProblem[]): CertificateeError {
	const err = new CertificateeError(
		"CONFIG_INVALID",
		`${file}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems.map((p) => `  ${p.path}: ${p.message}`).join("\n")}`,
		{ context: { file }, hint: "fix the listed keys; see docs/configuration.md" },
	);
	(err as CertificateeError & { problems: ConfigProblem[] }).problems = problems;
	return err;
}

export function configProblems(e: CertificateeError): ConfigProblem[] {
	return (e as CertificateeError & { problems?: ConfigProblem[] }).problems ?? [];
}

export function loadConfigFile(file: string, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
	let text: string;
	try {
		text = readFileSync(file, "utf8");
	} catch (e) {
		const code = (e as NodeJS.ErrnoException).code;
		throw new CertificateeError(
			code === "ENOENT" ? "CONFIG_NOT_FOUND" : "CONFIG_INVALID",
			`${file}: cannot read the configuration (${code ?? "error"})`,
			{
				context: { file },
				hint: "pass --config FILE or set CERTIFICATEE_CONFIG; `certificatee demo` runs the embedded default",
			},
		);
	}
	const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
	if (doc.errors.length > 0) {
		throw configError(
			file,
			doc.errors.map((e) => ({
				path: e.linePos?.[0] ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : "(yaml)",
				message: e.message.split("\n")[0] ?? e.message,
			})),
		);
	}
	return parseConfig(doc.toJS(), file, { env, baseDir: process.cwd() });
}
