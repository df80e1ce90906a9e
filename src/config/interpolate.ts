/**
 * Secrets are never inline by necessity: `${ENV_VAR}` in any string value, and `<key>_file` for secret keys
 * (`password_file: /run/secrets/dpapi` becomes `password`). Runs on the raw YAML tree, before the schema.
 */
import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { secretFileExposure } from "../base/secret-file.js";
import { CertificateeError, rememberSecret } from "../errors.js";

/** Keys whose value may come from a file named by `<key>_file`. */
export const SECRET_KEYS = ["password", "hmac_key", "eab_hmac_key", "token", "listen_token"] as const;

export interface InterpolateProblem {
	path: string;
	message: string;
	/** Set when a `<key>_file` could not be read: the schema's "missing <key>" at this path says nothing more. */
	supersedes?: string;
}

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
	let out = "";
	for (const p of path) {
		if (typeof p === "number") out += `[${p}]`;
		else out += out === "" ? String(p) : `.${String(p)}`;
	}
	return out || "(top level)";
}

export function interpolate(
	value: unknown,
	env: NodeJS.ProcessEnv,
	problems: InterpolateProblem[],
	path: PropertyKey[] = [],
	/** Relative `<key>_file` paths are read from here (the configuration file's directory). */
	baseDir = process.cwd(),
): unknown {
	if (typeof value === "string") {
		return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => {
			const v = env[name];
			if (v === undefined) {
				problems.push({
					path: formatPath(path),
					message: `environment variable ${name} is not set`,
				});
				return "";
			}
			return v;
		});
	}
	if (Array.isArray(value)) return value.map((v, i) => interpolate(v, env, problems, [...path, i], baseDir));
	if (value !== null && typeof value === "object") {
		const out: Record<string, unknown> = {};
		for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env, problems, [...path, k], baseDir);
		for (const key of SECRET_KEYS) {
			const fileKey = `${key}_file`;
			if (!(fileKey in out)) continue;
			const where = formatPath([...path, fileKey]);
			if (key in out) {
				problems.push({ path: where, message: `give either ${key} or ${fileKey}, not both` });
				continue;
			}
			const file = out[fileKey];
			if (typeof file !== "string") {
				problems.push({ path: where, message: "expected a file path" });
				continue;
			}
			const absolute = isAbsolute(file) ? file : resolve(baseDir, file);
			try {
				out[key] = readFileSync(absolute, "utf8").replace(/\r?\n$/, "");
				const exposed = secretFileExposure(absolute, fileKey);
				if (exposed !== undefined)
					problems.push({ path: where, message: exposed, supersedes: formatPath([...path, key]) });
			} catch (e) {
				const reason = (e as NodeJS.ErrnoException).code ?? "unreadable";
				problems.push({
					path: where,
					message: `cannot read ${absolute} (${reason}): create it, fix its permissions, or set ${key} through \${ENV}`,
					supersedes: formatPath([...path, key]),
				});
			}
			delete out[fileKey];
		}
		// Inline, from ${ENV} or from a file: scrubbed by value from every message from now on.
		for (const key of SECRET_KEYS) if (typeof out[key] === "string") rememberSecret(out[key]);
		return out;
	}
	return value;
}

export function secretFileError(problems: InterpolateProblem[], file: string): CertificateeError {
	return new CertificateeError(
		"CONFIG_SECRET_UNREADABLE",
		`${file}: ${problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`,
		{ context: { file } },
	);
}
