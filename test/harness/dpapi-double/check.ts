/**
 * Checks one exchange of the double against the spec: the request (parameters, content type, body) before
 * it is served, and the response (status declared, content type, body schema) before it is sent.
 * Problems come back as sentences; the double records them and tests assert there are none.
 */
import { type Operation, SetMatchType } from "openapi-backend";
import type { SpecValidator } from "./spec.js";

export interface IncomingRequest {
	method: string;
	/** Below /v3, without the query string. */
	path: string;
	query: string;
	headers: Record<string, string | string[]>;
	/** Parsed body: JSON value, form fields (multipart) or text. */
	body: unknown;
	/** Multipart parts that carried a filename. */
	fileParts: string[];
}

export interface RequestVerdict {
	/** The status a real v3.4 server gives such a request (400 parameters, 415 content type, 422 body). */
	status: 400 | 415 | 422;
	problems: string[];
}

function mediaType(value: string | string[] | undefined): string {
	const raw = Array.isArray(value) ? value[0] : value;
	return String(raw ?? "")
		.split(";")[0]!
		.trim()
		.toLowerCase();
}

function describe(errors: { instancePath?: string; message?: string }[] | null | undefined): string[] {
	return (errors ?? []).map((e) => `${e.instancePath || "(root)"} ${e.message ?? "invalid"}`);
}

interface BodySpec {
	required?: boolean;
	content?: Record<string, { schema?: { required?: string[] } }>;
}

export function checkRequest(
	spec: SpecValidator,
	operation: Operation,
	req: IncomingRequest,
): RequestVerdict | undefined {
	const body = spec.requestBody(operation.operationId ?? "") as BodySpec | undefined;
	const type = mediaType(req.headers["content-type"]);
	if (body?.content !== undefined && (body.required || type !== "")) {
		const declared = Object.keys(body.content);
		if (!declared.includes(type)) {
			return { status: 415, problems: [`content type "${type}" is not one of ${declared.join(", ")}`] };
		}
		// openapi-backend drops required binary parts: check the multipart parts named by the spec here.
		if (type === "multipart/form-data") {
			const missing = (body.content[type]?.schema?.required ?? []).filter((p) => !req.fileParts.includes(p));
			if (missing.length > 0)
				return { status: 400, problems: [`missing file part(s) ${missing.join(", ")}`] };
		}
	} else if (body === undefined && type !== "" && req.body !== undefined && req.body !== "") {
		return { status: 400, problems: [`operation takes no body, got ${type}`] };
	}
	const result = spec.api.validateRequest(
		{ method: req.method, path: req.path, query: req.query, headers: req.headers, body: req.body },
		operation,
	);
	if (result.valid) return undefined;
	const problems = describe(result.errors);
	const bodyOnly = (result.errors ?? []).every((e) => e.instancePath?.startsWith("/requestBody"));
	return { status: bodyOnly ? 422 : 400, problems };
}

interface ResponseSpec {
	content?: Record<string, unknown>;
}

export function checkResponse(
	spec: SpecValidator,
	operation: Operation,
	status: number,
	headers: Record<string, string>,
	body: unknown,
): string[] {
	const responses = (operation.responses ?? {}) as Record<string, ResponseSpec>;
	const declared = responses[String(status)] ?? responses.default;
	if (declared === undefined) return [`status ${status} is not declared`];
	const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
	// Headers the spec declares for this status (Reload-ID on a 202, Configuration-Version) must be sent.
	const headerCheck = spec.api.validateResponseHeaders(lower, operation, {
		statusCode: status,
		setMatchType: SetMatchType.Superset,
	});
	if (!headerCheck.valid) return describe(headerCheck.errors).map((p) => `status ${status} headers: ${p}`);
	const contentType = lower["content-type"];
	if (declared.content === undefined) {
		return body === undefined ? [] : [`status ${status} declares no body, but one was sent`];
	}
	const type = mediaType(contentType);
	if (!(type in declared.content)) return [`status ${status}: content type "${type}" not declared`];
	const result = spec.api.validateResponse(body, operation, status);
	return result.valid ? [] : describe(result.errors).map((p) => `status ${status} body: ${p}`);
}

/**
 * Answers dataplaneapi 3.4 really sends that its own spec does not allow: served as the server sends them
 * (a client must read them) and not recorded as violations. The reason, or undefined for any other answer.
 */
export function serverDeviation(operationId: string, status: number, body: unknown): string | undefined {
	if (status !== 200) return undefined;
	// configuration.ParseCrtLoads returns a nil slice for a store without loads; jsoniter encodes it as null.
	if (operationId === "getCrtLoads" && body === null) return "a crt-store without loads is null, not []";
	// An unnamed `crt-store` section (HAProxy's `@/alias`) is listed with the empty name the pattern forbids.
	const stores = Array.isArray(body) ? body : [body];
	if (
		(operationId === "getCrtStores" || operationId === "getCrtStore") &&
		stores.some((s) => (s as { name?: unknown } | null)?.name === "")
	) {
		return 'an unnamed crt-store has the name ""';
	}
	return undefined;
}
