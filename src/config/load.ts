/** Reading the configuration file: YAML, then secrets and environment, then the schema. */
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { type Document, isCollection, isMap, isScalar, LineCounter, parseDocument } from "yaml";
import type { z } from "zod";
import { CertificateeError } from "../errors.js";
import { formatPath, type InterpolateProblem, interpolate } from "./interpolate.js";
import { resolvePaths } from "./paths.js";
import { type Config, configSchema, referenceProblems } from "./schema.js";
import { closestKey, knownKeys } from "./suggest.js";

export interface ConfigProblem {
	path: string;
	message: string;
	/** The error code, where the problem has one (a source file's BUNDLE_EXPIRED, STATE_UNWRITABLE, ...). */
	code?: string;
	hint?: string;
	/** Where in the file (1-based), when the problem has a place there. */
	line?: number;
	column?: number;
}

/** The default of `listen` where the configuration leaves it out (the container image sets 0.0.0.0:9810). */
export const LISTEN_ENV = "CERTIFICATEE_LISTEN";

export interface LoadedConfig {
	config: Config;
	/** The file it came from, or "(embedded default)". */
	file: string;
}

export function defaultConfigPath(env: NodeJS.ProcessEnv = process.env): string {
	// Set but empty (`CERTIFICATEE_CONFIG= certificatee …`) is unset: "" is no file.
	return env.CERTIFICATEE_CONFIG || "./certificatee.yaml";
}

/**
 * Validates an already-parsed tree. Relative paths in the config (and in `*_file` keys) are resolved against
 * `baseDir`, the configuration file's directory (default: the working directory).
 */
export function parseConfig(
	raw: unknown,
	file: string,
	options: { env?: NodeJS.ProcessEnv; baseDir?: string } = {},
): LoadedConfig {
	const env = options.env ?? process.env;
	const baseDir = options.baseDir ?? process.cwd();
	const secretProblems: InterpolateProblem[] = [];
	const tree = withListenDefault(raw ?? {}, env);
	const interpolated = interpolate(tree, env, secretProblems, [], baseDir);
	const problems: ConfigProblem[] = secretProblems.map(({ path, message }) => ({ path, message }));
	const superseded = new Set(secretProblems.flatMap((p) => (p.supersedes ? [p.supersedes] : [])));
	const parsed = configSchema.safeParse(interpolated);
	problems.push(...referenceProblems(interpolated));
	if (!parsed.success) problems.push(...schemaProblems(parsed.error.issues, interpolated, superseded));
	if (problems.length > 0 || !parsed.success) throw configError(file, problems);
	return { config: resolvePaths(parsed.data, baseDir), file };
}

/**
 * Zod's issues as problems: an unknown key suggests the closest known one (and then the "missing" problem of
 * that key is left out: it is the same mistake); a missing key says so.
 */
function schemaProblems(issues: z.core.$ZodIssue[], tree: unknown, superseded: Set<string>): ConfigProblem[] {
	const out: ConfigProblem[] = [];
	const suggested = new Set<string>();
	for (const issue of issues) {
		if (issue.code !== "unrecognized_keys") continue;
		const known = knownKeys(configSchema, issue.path, tree);
		for (const key of issue.keys) {
			const near = closestKey(key, known);
			if (near) suggested.add(formatPath([...issue.path, near]));
			out.push({
				path: formatPath([...issue.path, key]),
				message: near ? `unknown key: did you mean \`${near}\`?` : `unknown key (known: ${known.join(", ")})`,
			});
		}
	}
	for (const issue of issues) {
		const path = formatPath(issue.path);
		if (issue.code === "unrecognized_keys" || superseded.has(path) || suggested.has(path)) continue;
		const missing = issue.code === "invalid_type" && /received undefined$/.test(issue.message);
		const kind = unknownKind(issue, tree);
		out.push({
			path,
			message: kind ?? (missing ? `missing: this key is required (${issue.expected})` : issue.message),
		});
	}
	return out;
}

/** An unknown `type` of a source or target: what was written, the closest kind, and every kind. */
function unknownKind(issue: z.core.$ZodIssue, tree: unknown): string | undefined {
	if (issue.code !== "invalid_union") return undefined;
	const { discriminator, options } = issue as { discriminator?: unknown; options?: unknown };
	if (typeof discriminator !== "string" || !Array.isArray(options)) return undefined;
	let value: unknown = tree;
	for (const step of issue.path) value = (value as Record<PropertyKey, unknown> | undefined)?.[step];
	const kinds = options.map(String);
	if (value === undefined) return `missing: this key is required (one of ${kinds.join(", ")})`;
	const near = typeof value === "string" ? closestKey(value, kinds) : undefined;
	const all = `known: ${kinds.join(", ")}`;
	return `unknown ${discriminator} "${String(value)}": ${near ? `did you mean \`${near}\`? (${all})` : all}`;
}

function withListenDefault(raw: unknown, env: NodeJS.ProcessEnv): unknown {
	const listen = env[LISTEN_ENV];
	if (listen === undefined || listen === "" || raw === null || typeof raw !== "object" || Array.isArray(raw))
		return raw;
	return "listen" in raw ? raw : { ...raw, listen };
}

export function configError(file: string, problems: ConfigProblem[]): CertificateeError {
	const err = new CertificateeError(
		"CONFIG_INVALID",
		`${file}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems.map((p) => `  ${formatProblem(p)}`).join("\n")}`,
		{ context: { file }, hint: "fix the listed keys; see docs/configuration.md" },
	);
	(err as CertificateeError & { problems: ConfigProblem[] }).problems = problems;
	return err;
}

/** `targets[0].pth (line 4, column 26): unknown key …` */
export function formatProblem(p: ConfigProblem): string {
	const at = p.line === undefined ? "" : ` (line ${p.line}, column ${p.column ?? 1})`;
	return `${p.path}${at}: ${p.code ? `${p.code}: ` : ""}${p.message}`;
}

/** `targets[0].endpoints[1].name` → ["targets", 0, "endpoints", 1, "name"]. */
function pathSteps(path: string): Array<string | number> {
	return [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) =>
		m[2] === undefined ? (m[1] ?? "") : Number(m[2]),
	);
}

/**
 * Line and column of a problem's path in the YAML document: the key itself for a key that is there (so an
 * unknown key points at its name), else the nearest enclosing node that is (a missing key points at its map).
 */
function locate(
	doc: Document,
	lines: LineCounter,
	path: string,
): { line: number; column: number } | undefined {
	const steps = pathSteps(path);
	for (let n = steps.length; n > 0; n--) {
		const parent = n === 1 ? doc.contents : doc.getIn(steps.slice(0, n - 1), true);
		const last = steps[n - 1];
		let offset: number | undefined;
		if (isMap(parent)) {
			const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === last);
			const key = pair?.key;
			if (isScalar(key) && key.range) offset = key.range[0];
		} else if (isCollection(parent)) {
			const node = parent.get(last, true);
			if ((isScalar(node) || isCollection(node)) && node.range) offset = node.range[0];
		}
		if (offset === undefined && n === 1 && isCollection(parent) && parent.range) offset = parent.range[0];
		if (offset !== undefined) {
			const { line, col } = lines.linePos(offset);
			return { line, column: col };
		}
	}
	return undefined;
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
				hint:
					code === "ENOENT"
						? "pass -c FILE (--config FILE) or set $CERTIFICATEE_CONFIG (default ./certificatee.yaml); `certificatee demo` runs the embedded default"
						: "check the file's permissions: certificatee must be able to read it",
			},
		);
	}
	const lines = new LineCounter();
	const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true, lineCounter: lines });
	if (doc.errors.length > 0) {
		throw configError(
			file,
			doc.errors.map((e) => ({
				path: e.linePos?.[0] ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : "(yaml)",
				message: e.message.split("\n")[0] ?? e.message,
			})),
		);
	}
	try {
		return parseConfig(doc.toJS(), file, { env, baseDir: dirname(resolve(file)) });
	} catch (e) {
		if (!(e instanceof CertificateeError)) throw e;
		const problems = configProblems(e);
		if (problems.length === 0) throw e;
		throw configError(
			file,
			// In file order: an operator fixes them top to bottom.
			problems
				.map((p) => ({ ...p, ...locate(doc, lines, p.path) }))
				.sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity) || (a.column ?? 0) - (b.column ?? 0)),
		);
	}
}
