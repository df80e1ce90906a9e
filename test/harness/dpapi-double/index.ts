/**
 * A Data Plane API v3 double for the certificate endpoints, in front of a real HAProxy from
 * test/harness/haproxy.ts. Every request and response is checked against the v3 OpenAPI document
 * (violations are recorded; `assertSpecClean()` fails the test), requests are counted per operation,
 * and faults can be injected per operation or call number.
 *
 *   const double = await startDpapiDouble({ haproxy: h });
 *   ... double.url, double.counts(), double.inject({ operation: "getAllCerts", kind: "status500" })
 *   double.assertSpecClean(); await double.close();
 */

import { execFile } from "node:child_process";
import { copyFile } from "node:fs/promises";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import type { Operation } from "openapi-backend";
import { RuntimeClient } from "../../../src/targets/haproxy-runtime/socket.js";
import type { Haproxy } from "../haproxy.js";
import { checkRequest, checkResponse, type IncomingRequest, serverDeviation } from "./check.js";
import { type DoubleContext, errorBody, type Handled, type RuntimeOverflow } from "./context.js";
import { crtStores } from "./crt-stores.js";
import { frontUses } from "./front-uses.js";
import { maps } from "./maps.js";
import { runtime } from "./runtime.js";
import { loadSpecValidator } from "./spec.js";
import { flagsOf, storage } from "./storage.js";

const run = promisify(execFile);

export type FaultKind =
	| { kind: "latency"; ms: number }
	/** Never answers (the connection stays open until the client gives up). */
	| { kind: "timeout" }
	/** A 500 with this message (default "injected fault"), e.g. HAProxy's "currently locked" text. */
	| { kind: "status500"; message?: string }
	| { kind: "status401" }
	/** Any other error status with this message, e.g. the 409 a storage DELETE gets for a file haproxy.cfg names. */
	| { kind: "status"; status: number; message?: string }
	/** An HTML page, as a proxy or login portal would send (status 200 unless given). */
	| { kind: "html"; status?: number }
	/** JSON cut in the middle. */
	| { kind: "truncated" }
	/** Valid JSON of the wrong shape. */
	| { kind: "wrong-shape" }
	/** TCP reset instead of an answer. */
	| { kind: "reset" };

export type Fault = FaultKind & {
	/** operationId (e.g. "getAllCerts"); any operation when absent. */
	operation?: string;
	/** Fire on this call number of the operation (1-based); every call when absent. */
	call?: number;
	/** How many times it fires; unlimited when absent. */
	times?: number;
};

export interface RequestRecord {
	operation: string;
	method: string;
	path: string;
	/** Query string without "?". */
	query: string;
	status: number | "no answer" | "reset";
	startedAt: number;
	endedAt?: number;
}

export interface DpapiDoubleOptions {
	haproxy: Haproxy;
	/** ssl-certs-dir; default the HAProxy's crt directory. */
	storageDir?: string;
	/** maps_dir, where runtime map names resolve; default the HAProxy's temp dir. */
	mapsDir?: string;
	username?: string;
	password?: string;
	/** Serve HTTPS with this certificate. */
	tls?: { certPem: string; keyPem: string };
	/** Behave like servers that ignore skip_reload (v2, early v3.0): push at runtime, 202 when that fails. */
	ignoreSkipReload?: boolean;
	/** List crt-directory members (`<path>:0`) with line_number 0, as older client-native did. Default: hidden,
	 * as current client-native's parser drops them (the directory's crt-list answers with no entries). */
	lineZeroEntries?: boolean;
	/** HAProxy's tune.bufsize (default 16384): `set ssl cert` requests that reach it are recorded in
	 * `overflows` and answered as the real server would, never sent to the test HAProxy. */
	bufsize?: number;
	/** Reach HAProxy through the master CLI (`@1 <cmd>`), as dataplaneapi does with `master_runtime` in
	 * master-worker mode (client-native's runtime client), instead of the worker's admin socket. */
	masterRuntime?: boolean;
}

export interface DpapiDouble {
	readonly url: string;
	readonly username: string;
	readonly password: string;
	/** The runtime client the double drives HAProxy with (for assertions on HAProxy's own view). */
	readonly runtime: RuntimeClient;
	/** Whether it reaches HAProxy through the master CLI (the endpoint's `master_runtime`). */
	readonly masterRuntime: boolean;
	/** Requests per operationId (faulted ones included), or one operation's count. */
	counts(): Record<string, number>;
	count(operation: string): number;
	readonly requests: RequestRecord[];
	/** Reload-IDs the double answered 202 with. */
	readonly scheduledReloads: string[];
	/** Runtime requests a real server would have sent at or over tune.bufsize (hanging or killing HAProxy). */
	readonly overflows: RuntimeOverflow[];
	inject(fault: Fault): void;
	clearFaults(): void;
	/** Off-spec requests and responses seen so far. */
	readonly violations: string[];
	/** Throws when any request or response strayed from the spec. */
	assertSpecClean(): void;
	close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
	const chunks: Buffer[] = [];
	for await (const chunk of req) chunks.push(chunk as Buffer);
	return Buffer.concat(chunks);
}

export interface ParsedBody {
	body: unknown;
	fileParts: string[];
	files: Map<string, { filename: string; text: string }>;
}

/** The request body as the double reads it (multipart parts, JSON, or text); the bench's stand-in reuses it. */
export async function parseBody(headers: IncomingMessage["headers"], raw: Buffer): Promise<ParsedBody> {
	const type = String(headers["content-type"] ?? "");
	const files = new Map<string, { filename: string; text: string }>();
	if (raw.length === 0) return { body: undefined, fileParts: [], files };
	if (/^multipart\/form-data/i.test(type)) {
		const form = await new Request("http://double/", {
			method: "POST",
			headers: { "content-type": type },
			body: new Uint8Array(raw),
		}).formData();
		const fields: Record<string, string> = {};
		for (const [key, value] of form.entries()) {
			if (typeof value === "string") fields[key] = value;
			else {
				const text = await value.text();
				fields[key] = text;
				files.set(key, { filename: value.name, text });
			}
		}
		return { body: fields, fileParts: [...files.keys()], files };
	}
	const text = raw.toString("utf8");
	if (/json/i.test(type)) {
		try {
			return { body: JSON.parse(text), fileParts: [], files };
		} catch {
			return { body: text, fileParts: [], files };
		}
	}
	return { body: text, fileParts: [], files };
}

function definedHeaders(headers: IncomingMessage["headers"]): Record<string, string | string[]> {
	const out: Record<string, string | string[]> = {};
	for (const [k, v] of Object.entries(headers)) if (v !== undefined) out[k] = v;
	return out;
}

type Route = (ctx: DoubleContext, r: RouteInput) => Promise<Handled>;
export interface RouteInput {
	params: Record<string, string>;
	query: URLSearchParams;
	parsed: ParsedBody;
}

const file = (r: RouteInput) => r.parsed.files.get("file_upload") ?? { filename: "", text: "" };
const name = (r: RouteInput) => r.params.name ?? "";

/** The handler of each operationId (the bench's Data Plane API stand-in performs its writes through them). */
export const routes: Record<string, Route> = {
	getInfo: async () => ({
		status: 200,
		body: {
			api: { version: "v3.4.2 certificatee-double", build_date: "2026-08-14T00:00:00.000Z" },
			system: { hostname: "double" },
		},
	}),
	getHaproxyProcessInfo: (ctx) => runtime.info(ctx),
	getAllStorageSSLCertificates: (ctx) => storage.list(ctx),
	getOneStorageSSLCertificate: (ctx, r) => storage.get(ctx, name(r)),
	createStorageSSLCertificate: (ctx, r) => {
		const upload = r.parsed.files.get("file_upload");
		if (!upload) return Promise.resolve(errorBody(400, "file_upload is required"));
		return storage.create(ctx, upload, flagsOf(r.query));
	},
	replaceStorageSSLCertificate: (ctx, r) =>
		storage.replace(ctx, name(r), String(r.parsed.body ?? ""), flagsOf(r.query)),
	deleteStorageSSLCertificate: (ctx, r) => storage.delete(ctx, name(r), flagsOf(r.query)),
	getAllCerts: (ctx) => runtime.list(ctx),
	getCert: (ctx, r) => runtime.get(ctx, name(r)),
	createCert: (ctx, r) => runtime.create(ctx, file(r)),
	replaceCert: (ctx, r) => runtime.replace(ctx, name(r), file(r).text),
	deleteCert: (ctx, r) => runtime.delete(ctx, name(r)),
	showRuntimeMap: (ctx, r) => maps.entries(ctx, r.params.parent_name ?? ""),
	addMapEntry: (ctx, r) => maps.add(ctx, r.params.parent_name ?? "", r.parsed.body),
	deleteRuntimeMapEntry: (ctx, r) => maps.delete(ctx, r.params.parent_name ?? "", r.params.id ?? ""),
	clearRuntimeMap: (ctx, r) => maps.clear(ctx, name(r)),
	getCrtStores: (ctx) => crtStores.list(ctx),
	getCrtStore: (ctx, r) => crtStores.get(ctx, name(r)),
	getCrtLoads: (ctx, r) => crtStores.loads(ctx, r.params.crt_store ?? ""),
	getCrtLoad: (ctx, r) => crtStores.load(ctx, r.params.crt_store ?? "", r.params.certificate ?? ""),
	getAllSSLFrontUses: (ctx, r) => frontUses(ctx, r.params.parent_name ?? ""),
	getAllCrtLists: (ctx) => runtime.crtLists(ctx),
	getAllCrtListEntries: (ctx, r) => runtime.entries(ctx, r.query.get("name") ?? ""),
	addCrtListEntry: (ctx, r) => runtime.addEntry(ctx, r.query.get("name") ?? "", r.parsed.body),
	deleteCrtListEntry: (ctx, r) => {
		const line = r.query.get("line_number");
		return runtime.deleteEntry(
			ctx,
			r.query.get("name") ?? "",
			r.query.get("cert_file") ?? "",
			line === null ? undefined : Number(line),
		);
	},
};

const RUNTIME_OPERATIONS = new Set([
	"getAllCerts",
	"getCert",
	"createCert",
	"replaceCert",
	"deleteCert",
	"getAllCrtLists",
	"getAllCrtListEntries",
	"addCrtListEntry",
	"deleteCrtListEntry",
	"showRuntimeMap",
	"addMapEntry",
	"deleteRuntimeMapEntry",
	"clearRuntimeMap",
]);

export async function startDpapiDouble(options: DpapiDoubleOptions): Promise<DpapiDouble> {
	const spec = await loadSpecValidator();
	const username = options.username ?? "admin";
	const password = options.password ?? "double-password";
	const expectedAuth = `Basic ${Buffer.from(`${username}:${password}`).toString("base64")}`;
	// The worker's admin socket, with the client's own reload detection before each request: the master
	// socket is briefly absent while the master re-executes itself on a reload.
	const runtimeSocket = options.masterRuntime ? options.haproxy.masterSocket : options.haproxy.adminSocket;
	const client = new RuntimeClient({
		address: runtimeSocket,
		name: "double",
		...(options.masterRuntime ? { master: true } : {}),
		// client-native dials once more at once and then fails (runtime/runtime_single_client.go): the double
		// must not wait out a master's reload as certificatee's own runtime client does.
		reloadWait: false,
	});
	// The reload agent's last known good configuration, taken at start as dataplaneapi does.
	await copyFile(join(options.haproxy.dir, "haproxy.cfg"), join(options.haproxy.dir, "haproxy.cfg.lkg"));
	let reloadCounter = 0;
	const scheduledReloads: string[] = [];
	const overflows: RuntimeOverflow[] = [];
	const ctx: DoubleContext = {
		lineZeroEntries: options.lineZeroEntries ?? false,
		bufsize: options.bufsize ?? 16_384,
		overflows,
		storageDir: options.storageDir ?? options.haproxy.crtDir,
		mapsDir: options.mapsDir ?? options.haproxy.dir,
		configFile: join(options.haproxy.dir, "haproxy.cfg"),
		runtime: client,
		runtimeSocket,
		// The reload agent with a reload command like Debian's `systemctl reload haproxy` (haproxy -c, then
		// SIGUSR2; client-native's master-socket reload needs HAProxy 2.7): a command that fails restores
		// haproxy.cfg from the last known good copy and throws; certificate files are never rolled back.
		reload: async () => {
			const cfg = join(options.haproxy.dir, "haproxy.cfg");
			const check = await run(options.haproxy.bin, ["-c", "-q", "-f", cfg]).then(
				() => undefined,
				(e: { stderr?: string; code?: number }) => e,
			);
			if (check !== undefined) {
				await copyFile(`${cfg}.lkg`, cfg);
				throw new Error(
					`executing systemctl reload haproxy failed: exit status ${check.code ?? 1}, ${(check.stderr ?? "").trim()}`,
				);
			}
			await options.haproxy.reload();
			await copyFile(cfg, `${cfg}.lkg`);
		},
		scheduleReload: () => {
			const id = `${new Date().toISOString().slice(0, 10)}-${++reloadCounter}`;
			scheduledReloads.push(id);
			return id;
		},
	};
	const counts: Record<string, number> = {};
	const requests: RequestRecord[] = [];
	const violations: string[] = [];
	let faults: (Fault & { fired: number })[] = [];

	function pickFault(operation: string, call: number): Fault | undefined {
		for (const f of faults) {
			if (f.operation !== undefined && f.operation !== operation) continue;
			if (f.call !== undefined && f.call !== call) continue;
			if (f.times !== undefined && f.fired >= f.times) continue;
			f.fired += 1;
			return f;
		}
		return undefined;
	}

	function send(
		res: ServerResponse,
		record: RequestRecord,
		operation: Operation | undefined,
		answer: Handled,
	): void {
		const body = answer.body === undefined ? undefined : JSON.stringify(answer.body);
		const headers: Record<string, string> = { "Configuration-Version": "1", ...(answer.headers ?? {}) };
		if (body !== undefined) headers["Content-Type"] = "application/json";
		if (answer.status === 401) headers["WWW-Authenticate"] = 'Basic realm="API"';
		if (operation && serverDeviation(operation.operationId ?? "", answer.status, answer.body) === undefined) {
			for (const p of checkResponse(spec, operation, answer.status, headers, answer.body)) {
				violations.push(`${operation.operationId} response: ${p}`);
			}
		}
		record.status = answer.status;
		record.endedAt = performance.now();
		res.writeHead(answer.status, headers);
		res.end(body);
	}

	async function applyFault(fault: Fault, res: ServerResponse, record: RequestRecord): Promise<boolean> {
		switch (fault.kind) {
			case "latency":
				await sleep(fault.ms);
				return false;
			case "timeout":
				record.status = "no answer";
				return true;
			case "reset":
				record.status = "reset";
				res.socket?.resetAndDestroy();
				return true;
			case "status500":
				record.status = 500;
				res.writeHead(500, { "Content-Type": "application/json" });
				res.end(JSON.stringify({ code: 500, message: fault.message ?? "injected fault" }));
				return true;
			case "status":
				record.status = fault.status;
				res.writeHead(fault.status, { "Content-Type": "application/json" });
				res.end(JSON.stringify({ code: fault.status, message: fault.message ?? "injected fault" }));
				return true;
			case "status401":
				record.status = 401;
				res.writeHead(401, { "Content-Type": "application/json", "WWW-Authenticate": 'Basic realm="API"' });
				res.end(JSON.stringify({ code: 401, message: "authentication failed" }));
				return true;
			case "html":
				record.status = fault.status ?? 200;
				res.writeHead(fault.status ?? 200, { "Content-Type": "text/html" });
				res.end("<!doctype html><html><body><h1>Sign in</h1></body></html>");
				return true;
			case "truncated":
				record.status = 200;
				res.writeHead(200, { "Content-Type": "application/json" });
				res.end('[{"storage_name": "a.pem", "file": "/etc/ha');
				return true;
			case "wrong-shape":
				record.status = 200;
				res.writeHead(200, { "Content-Type": "application/json" });
				res.end(JSON.stringify({ certificates: "none" }));
				return true;
		}
	}

	async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
		const url = new URL(req.url ?? "/", "http://double");
		const method = (req.method ?? "GET").toLowerCase();
		const path = url.pathname.replace(/^\/v3(?=\/)/, "").replace(/\/+$/, "") || "/";
		const raw = await readBody(req);
		const operation = url.pathname.startsWith("/v3/") ? spec.match(method, path) : undefined;
		const operationId = operation?.operationId ?? `unknown ${method.toUpperCase()} ${url.pathname}`;
		counts[operationId] = (counts[operationId] ?? 0) + 1;
		const record: RequestRecord = {
			operation: operationId,
			method,
			path: url.pathname,
			query: url.search.replace(/^\?/, ""),
			status: 0,
			startedAt: performance.now(),
		};
		requests.push(record);

		const fault = pickFault(operationId, counts[operationId] ?? 0);
		if (fault && (await applyFault(fault, res, record))) return;
		if (req.headers.authorization !== expectedAuth) {
			return send(res, record, operation, errorBody(401, "invalid authentication"));
		}
		if (operation === undefined) {
			violations.push(`request: no operation in the spec for ${method.toUpperCase()} ${url.pathname}`);
			return send(res, record, undefined, errorBody(404, "not found"));
		}
		let parsed: ParsedBody;
		try {
			parsed = await parseBody(req.headers, raw);
		} catch (e) {
			violations.push(`${operationId} request: unreadable body (${String(e)})`);
			return send(res, record, operation, errorBody(400, "bad request body"));
		}
		const incoming: IncomingRequest = {
			method,
			path,
			query: url.search.replace(/^\?/, ""),
			headers: definedHeaders(req.headers),
			body: parsed.body,
			fileParts: parsed.fileParts,
		};
		const verdict = checkRequest(spec, operation, incoming);
		if (verdict) {
			violations.push(`${operationId} request: ${verdict.problems.join("; ")}`);
			return send(res, record, operation, errorBody(verdict.status, verdict.problems.join("; ")));
		}
		const params = spec.api.router.parseRequest(incoming, operation).params as Record<string, string>;
		if (operationId !== "getInfo") {
			// A reload leaves an open connection talking to the old worker: reconnect to the current one.
			await client.checkWorker().catch(() => undefined);
		}
		// After a second request of exactly bufsize, the real HAProxy is gone: every runtime call fails.
		if (RUNTIME_OPERATIONS.has(operationId) && overflows.some((o) => o.effect === "haproxy killed")) {
			return send(
				res,
				record,
				operation,
				errorBody(500, "dial unix runtime socket: connect: connection refused"),
			);
		}
		const route = routes[operationId];
		if (!route)
			return send(res, record, operation, errorBody(501, `${operationId} not served by the double`));
		let answer: Handled;
		try {
			const query = new URLSearchParams(url.searchParams);
			if (options.ignoreSkipReload) query.delete("skip_reload");
			answer = await route(ctx, { params, query, parsed });
		} catch (e) {
			answer = errorBody(500, e instanceof Error ? e.message : String(e));
		}
		send(res, record, operation, answer);
	}

	const listener = (req: IncomingMessage, res: ServerResponse) => {
		handle(req, res).catch((e: unknown) => {
			violations.push(`double crashed: ${String(e)}`);
			if (!res.headersSent) res.writeHead(500).end();
		});
	};
	const server = options.tls
		? createHttpsServer({ cert: options.tls.certPem, key: options.tls.keyPem }, listener)
		: createHttpServer(listener);
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	const port = (server.address() as AddressInfo).port;

	return {
		url: `${options.tls ? "https" : "http"}://127.0.0.1:${port}`,
		username,
		password,
		runtime: client,
		masterRuntime: options.masterRuntime ?? false,
		counts: () => ({ ...counts }),
		count: (operation) => counts[operation] ?? 0,
		requests,
		scheduledReloads,
		overflows,
		inject: (fault) => {
			faults.push({ ...fault, fired: 0 });
		},
		clearFaults: () => {
			faults = [];
		},
		violations,
		assertSpecClean: () => {
			if (violations.length > 0) {
				throw new Error(`Data Plane API traffic strayed from the spec:\n- ${violations.join("\n- ")}`);
			}
		},
		close: async () => {
			server.closeAllConnections();
			await new Promise<void>((resolve) => server.close(() => resolve()));
			await client.close();
		},
	};
}
