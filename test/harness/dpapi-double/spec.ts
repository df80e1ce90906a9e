/**
 * The Data Plane API v3 OpenAPI document as a validator for the double's traffic. Only the paths the
 * double serves are compiled (with every component they reference, taken from the spec file unchanged):
 * compiling all 1.2 MB takes ~27 s, the subset well under a second.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { OpenAPIBackend, type Operation } from "openapi-backend";
import { parse } from "yaml";

/**
 * The spec vendored in this repository (spec/, an unmodified copy: see spec/SOURCE.md), else
 * shared/specs/dataplaneapi-v3.yaml in the nearest ancestor directory that has it, or $DPAPI_SPEC.
 */
export function findSpecFile(): string {
	const fromEnv = process.env.DPAPI_SPEC;
	if (fromEnv) return fromEnv;
	for (let dir = dirname(new URL(import.meta.url).pathname); ; dir = dirname(dir)) {
		for (const candidate of [
			join(dir, "spec", "dataplaneapi-v3.yaml"),
			join(dir, "shared", "specs", "dataplaneapi-v3.yaml"),
		]) {
			if (existsSync(candidate)) return candidate;
		}
		if (dirname(dir) === dir)
			throw new Error("dataplaneapi-v3.yaml not found above the test folder; set DPAPI_SPEC");
	}
}

export const SERVED_PATHS = [
	"/info",
	"/services/haproxy/runtime/info",
	"/services/haproxy/storage/ssl_certificates",
	"/services/haproxy/storage/ssl_certificates/{name}",
	"/services/haproxy/runtime/ssl_certs",
	"/services/haproxy/runtime/ssl_certs/{name}",
	"/services/haproxy/runtime/ssl_crt_lists",
	"/services/haproxy/runtime/ssl_crt_lists/entries",
	"/services/haproxy/runtime/maps/{name}",
	"/services/haproxy/runtime/maps/{parent_name}/entries",
	"/services/haproxy/runtime/maps/{parent_name}/entries/{id}",
	"/services/haproxy/configuration/crt_stores",
	"/services/haproxy/configuration/crt_stores/{name}",
	"/services/haproxy/configuration/crt_stores/{crt_store}/crt_loads",
	"/services/haproxy/configuration/crt_stores/{crt_store}/crt_loads/{certificate}",
	"/services/haproxy/configuration/frontends/{parent_name}/ssl_front_uses",
] as const;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

function refsIn(value: Json, found: Set<string>): void {
	if (Array.isArray(value)) for (const v of value) refsIn(v, found);
	else if (value !== null && typeof value === "object") {
		for (const [k, v] of Object.entries(value)) {
			if (k === "$ref" && typeof v === "string") found.add(v);
			else refsIn(v, found);
		}
	}
}

/** The served paths of the spec, plus the transitive closure of the components they reference. */
export function specSubset(full: JsonObject): JsonObject {
	const paths = full.paths as JsonObject;
	const components = full.components as Record<string, JsonObject>;
	const subset: Record<string, JsonObject> = {};
	const pending = new Set<string>();
	const picked: JsonObject = {};
	for (const p of SERVED_PATHS) {
		const item = paths[p];
		if (item === undefined) throw new Error(`spec has no path ${p}`);
		picked[p] = item;
		refsIn(item, pending);
	}
	const done = new Set<string>();
	while (pending.size > 0) {
		const ref = pending.values().next().value as string;
		pending.delete(ref);
		if (done.has(ref)) continue;
		done.add(ref);
		const m = /^#\/components\/([^/]+)\/(.+)$/.exec(ref);
		if (!m) throw new Error(`unsupported $ref ${ref}`);
		const [, kind, name] = m as unknown as [string, string, string];
		const target = components[kind]?.[name];
		if (target === undefined) throw new Error(`dangling $ref ${ref}`);
		subset[kind] = { ...(subset[kind] ?? {}), [name]: target };
		refsIn(target, pending);
	}
	subset.securitySchemes = components.securitySchemes as JsonObject;
	return { ...full, paths: picked, components: subset };
}

export interface SpecValidator {
	api: OpenAPIBackend;
	/** Operation for a method and a path below /v3, or undefined when the spec has none. */
	match(method: string, path: string): Operation | undefined;
	/**
	 * The operation's requestBody exactly as the spec file has it: openapi-backend rewrites its copy
	 * (it drops binary properties from `required`, which would hide a missing `file_upload` part).
	 */
	requestBody(operationId: string): JsonObject | undefined;
}

/**
 * The subset, cached as JSON in the temp directory per spec file version: parsing the 1.2 MB YAML costs
 * 0.6-2 s, and every test file (a fresh module graph) needs it.
 */
function loadSubset(): JsonObject {
	const file = findSpecFile();
	const { size, mtimeMs } = statSync(file);
	// Keyed by the served paths too: a subset cached before a path was added must not be reused.
	const paths = createHash("sha256").update(SERVED_PATHS.join("\n")).digest("hex").slice(0, 12);
	const cache = join(tmpdir(), `certificatee-dpapi-spec-${size}-${Math.round(mtimeMs)}-${paths}.json`);
	try {
		return JSON.parse(readFileSync(cache, "utf8")) as JsonObject;
	} catch {
		const subset = specSubset(parse(readFileSync(file, "utf8")) as JsonObject);
		const temp = `${cache}.${process.pid}`;
		writeFileSync(temp, JSON.stringify(subset));
		renameSync(temp, cache);
		return subset;
	}
}

let loading: Promise<SpecValidator> | undefined;

/** Loaded once per test worker: the spec never changes during a run. */
export function loadSpecValidator(): Promise<SpecValidator> {
	loading ??= (async () => {
		const full = loadSubset();
		const bodies = new Map<string, JsonObject>();
		for (const p of SERVED_PATHS) {
			for (const op of Object.values((full.paths as Record<string, Record<string, JsonObject>>)[p] ?? {})) {
				if (typeof op.operationId === "string" && op.requestBody) {
					bodies.set(op.operationId, structuredClone(op.requestBody) as JsonObject);
				}
			}
		}
		const api = new OpenAPIBackend({
			definition: specSubset(full) as never,
			validate: true,
			strict: true,
			// Validators compile on first use; the definition itself is not re-validated.
			quick: true,
			customizeAjv: (ajv) => {
				ajv.addFormat("date-time", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
				ajv.addFormat("date", /^\d{4}-\d\d-\d\d$/);
				return ajv;
			},
		});
		await api.init();
		return {
			api,
			match: (method, path) => api.matchOperation({ method, path, headers: {} }),
			requestBody: (operationId) => bodies.get(operationId),
		};
	})();
	return loading;
}
