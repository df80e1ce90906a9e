/**
 * A fast STAND-IN for the Data Plane API, for the fleet bench only. The spec-validating double
 * (test/harness/dpapi-double) stays the test double and the reference for every answer: the stand-in answers
 * the same requests with the double's own handlers (`routes`), but without the OpenAPI validation, and serves
 * reads from memory, so a fleet figure is certificatee's own cost rather than the double's.
 *
 * - Storage reads: the double's answer for a file, kept while the file's identity (inode, size, mtime, ctime)
 *   is unchanged (one stat per request); the list is the directory read each time.
 * - Runtime reads (certificates, crt-lists): read from the real HAProxy through the double's handlers once
 *   (warmed at start), then answered from memory until a write through this stand-in touches HAProxy or the
 *   worker changes (`getHaproxyProcessInfo` asks HAProxy every time and drops the memory on a new pid).
 * - Writes: the double's handlers, performed on the real HAProxy and the real files.
 * Requests are counted per operation (`GET /_standin/counts`).
 *
 * Run as a process by spawnStandins() (bench/lib/dpapi-standin-child.ts), several when one is not enough.
 */
import { spawn } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { copyFile, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import pLimit from "p-limit";
import { sanitizeStorageName } from "../../src/targets/haproxy-dataplane/client.js";
import { RuntimeClient } from "../../src/targets/haproxy-runtime/socket.js";
import { type DoubleContext, errorBody, type Handled } from "../../test/harness/dpapi-double/context.js";
import { parseBody, routes } from "../../test/harness/dpapi-double/index.js";

export interface StandinNode {
	/** HAProxy's admin socket (the worker's stats socket). */
	adminSocket: string;
	/** HAProxy's master CLI: when given, HAProxy is reached through it (`@1 <cmd>`), as dataplaneapi does with
	 * `master_runtime` (the endpoint's `master_runtime: true`). */
	masterSocket?: string;
	/** HAProxy's temp dir (haproxy.cfg, the maps dir). */
	haproxyDir: string;
	/** The API's ssl-certs-dir. */
	storageDir: string;
}

export interface StandinJob {
	nodes: StandinNode[];
	username: string;
	password: string;
}

/** An answer as sent: status, serialised body, extra headers. */
interface Sent {
	status: number;
	body?: string;
	headers?: Record<string, string>;
}

const sent = (h: Handled): Sent => ({
	status: h.status,
	...(h.body === undefined ? {} : { body: JSON.stringify(h.body) }),
	...(h.headers ? { headers: h.headers } : {}),
});

const API = "/v3/services/haproxy";
const NO_QUERY = new URLSearchParams();

const FIXED: Record<string, Record<string, string>> = {
	"/v3/info": { GET: "getInfo" },
	[`${API}/runtime/info`]: { GET: "getHaproxyProcessInfo" },
	[`${API}/storage/ssl_certificates`]: {
		GET: "getAllStorageSSLCertificates",
		POST: "createStorageSSLCertificate",
	},
	[`${API}/runtime/ssl_certs`]: { GET: "getAllCerts", POST: "createCert" },
	[`${API}/runtime/ssl_crt_lists`]: { GET: "getAllCrtLists" },
	[`${API}/runtime/ssl_crt_lists/entries`]: {
		GET: "getAllCrtListEntries",
		POST: "addCrtListEntry",
		DELETE: "deleteCrtListEntry",
	},
};

/** operationId and path parameters of a request; undefined when the stand-in does not serve it. */
export function routeOf(
	method: string,
	pathname: string,
): { operation: string; params: Record<string, string> } | undefined {
	const m = method.toUpperCase();
	const one = (prefix: string): string | undefined => {
		if (!pathname.startsWith(prefix)) return undefined;
		const rest = pathname.slice(prefix.length);
		return rest !== "" && !rest.includes("/") ? decodeURIComponent(rest) : undefined;
	};
	const path = pathname.replace(/\/+$/, "");
	const direct = FIXED[path]?.[m];
	if (direct) return { operation: direct, params: {} };
	const storage = one(`${API}/storage/ssl_certificates/`);
	if (storage !== undefined) {
		const op = {
			GET: "getOneStorageSSLCertificate",
			PUT: "replaceStorageSSLCertificate",
			DELETE: "deleteStorageSSLCertificate",
		}[m];
		return op ? { operation: op, params: { name: storage } } : undefined;
	}
	const cert = one(`${API}/runtime/ssl_certs/`);
	if (cert !== undefined) {
		const op = { GET: "getCert", PUT: "replaceCert", DELETE: "deleteCert" }[m];
		return op ? { operation: op, params: { name: cert } } : undefined;
	}
	const entries = /^\/v3\/services\/haproxy\/runtime\/maps\/([^/]+)\/entries(?:\/([^/]+))?$/.exec(path);
	if (entries) {
		const parent_name = decodeURIComponent(entries[1] ?? "");
		if (entries[2] !== undefined && m === "DELETE")
			return {
				operation: "deleteRuntimeMapEntry",
				params: { parent_name, id: decodeURIComponent(entries[2]) },
			};
		const op = entries[2] === undefined ? { GET: "showRuntimeMap", POST: "addMapEntry" }[m] : undefined;
		return op ? { operation: op, params: { parent_name } } : undefined;
	}
	const map = one(`${API}/runtime/maps/`);
	if (map !== undefined && m === "DELETE") return { operation: "clearRuntimeMap", params: { name: map } };
	return undefined;
}

/** Reads answered from HAProxy once, then from memory (per node). */
const RUNTIME_READS = new Set([
	"getAllCerts",
	"getCert",
	"getAllCrtLists",
	"getAllCrtListEntries",
	"showRuntimeMap",
]);
/** Storage writes that leave HAProxy's memory alone. */
const FILE_ONLY = (operation: string, query: URLSearchParams) =>
	/StorageSSLCertificate$/.test(operation) &&
	!operation.startsWith("get") &&
	query.get("skip_reload") === "true" &&
	query.get("force_reload") !== "true";

/** One file's answer, kept while the file is the same file with the same content. */
interface FileAnswer {
	identity: string;
	answer: Sent;
}

function identity(path: string): string | undefined {
	try {
		const s = statSync(path);
		return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
	} catch {
		return undefined;
	}
}

interface NodeServer {
	url: string;
	counts: Record<string, number>;
	close(): Promise<void>;
}

/** Starts one HTTP server per node in this process; resolves once every node's runtime memory is warm. */
export async function serveNodes(job: StandinJob): Promise<NodeServer[]> {
	const files = new Map<string, FileAnswer>();
	const expectedAuth = `Basic ${Buffer.from(`${job.username}:${job.password}`).toString("base64")}`;
	// The first node alone fills the storage answers the others share; then four at a time.
	const [first, ...rest] = job.nodes;
	if (first === undefined) return [];
	const head = await serveNode(first, expectedAuth, files);
	const limit = pLimit(4);
	return [
		head,
		...(await Promise.all(rest.map((node) => limit(() => serveNode(node, expectedAuth, files))))),
	];
}

async function serveNode(
	node: StandinNode,
	expectedAuth: string,
	files: Map<string, FileAnswer>,
): Promise<NodeServer> {
	const runtimeSocket = node.masterSocket ?? node.adminSocket;
	const client = new RuntimeClient({
		address: runtimeSocket,
		name: "standin",
		...(node.masterSocket ? { master: true } : {}),
	});
	const configFile = join(node.haproxyDir, "haproxy.cfg");
	await copyFile(configFile, `${configFile}.lkg`);
	const ctx: DoubleContext = {
		lineZeroEntries: false,
		bufsize: 16_384,
		overflows: [],
		storageDir: node.storageDir,
		mapsDir: node.haproxyDir,
		configFile,
		runtime: client,
		runtimeSocket,
		reload: () => Promise.reject(new Error("reloads are not served by the bench's Data Plane API stand-in")),
		scheduleReload: () => "standin-no-reload",
	};
	const counts: Record<string, number> = {};
	/** operation + query or name -> answer, read from HAProxy since the last write or worker change. */
	let runtime = new Map<string, Sent>();
	let workerPid: number | undefined;

	async function runtimeRead(operation: string, params: Record<string, string>, query: URLSearchParams) {
		const key = `${operation} ${params.name ?? params.parent_name ?? ""} ${query.get("name") ?? ""}`;
		const known = runtime.get(key);
		if (known) return known;
		const memory = runtime;
		const answer = sent(
			await (routes[operation] as NonNullable<(typeof routes)[string]>)(ctx, {
				params,
				query,
				parsed: { body: undefined, fileParts: [], files: new Map() },
			}),
		);
		// A write or a reload meanwhile dropped the memory: this answer may predate it, so it is not kept.
		if (memory === runtime && answer.status < 500) runtime.set(key, answer);
		return answer;
	}

	function storageGet(rawName: string): Sent | undefined {
		const path = join(node.storageDir, sanitizeStorageName(rawName));
		const id = identity(path);
		const known = files.get(path);
		return id !== undefined && known?.identity === id ? known.answer : undefined;
	}

	async function storageRead(rawName: string): Promise<Sent> {
		const cached = storageGet(rawName);
		if (cached) return cached;
		const path = join(node.storageDir, sanitizeStorageName(rawName));
		const before = identity(path);
		const answer = sent(
			await routes.getOneStorageSSLCertificate!(ctx, {
				params: { name: rawName },
				query: new URLSearchParams(),
				parsed: { body: undefined, fileParts: [], files: new Map() },
			}),
		);
		// Kept only when the file did not change while it was read.
		if (before !== undefined && identity(path) === before) files.set(path, { identity: before, answer });
		return answer;
	}

	/** As the real list: `file`, `storage_name`, `description` per item, nothing more (client-native
	 * storage/storage.go GetAll reads and checks every file; dataplaneapi GetAllStorageSSLCertificates). */
	async function storageList(): Promise<Sent> {
		const items: Array<Record<string, string>> = [];
		const names = readdirSync(node.storageDir, { withFileTypes: true })
			.filter((e) => e.isFile())
			.map((e) => e.name)
			.sort((a, b) => a.localeCompare(b));
		for (const name of names) {
			// The list skips files without both a certificate and a key: the GET's answer says which.
			const answer = await storageRead(name);
			if (answer.status !== 200) continue;
			items.push({ file: join(node.storageDir, name), storage_name: name, description: "managed SSL file" });
		}
		return { status: 200, body: JSON.stringify(items) };
	}

	async function answer(
		req: IncomingMessage,
		url: { pathname: string; searchParams: URLSearchParams },
	): Promise<Sent> {
		const route = routeOf(req.method ?? "GET", url.pathname);
		const operation = route?.operation ?? `unknown ${req.method} ${url.pathname}`;
		counts[operation] = (counts[operation] ?? 0) + 1;
		if (req.headers.authorization !== expectedAuth) return sent(errorBody(401, "invalid authentication"));
		if (route === undefined) return sent(errorBody(404, "not served by the bench's Data Plane API stand-in"));
		const { params } = route;
		const query = url.searchParams;
		switch (operation) {
			case "getAllStorageSSLCertificates":
				return storageList();
			case "getOneStorageSSLCertificate":
				return storageRead(params.name ?? "");
			case "getHaproxyProcessInfo": {
				const info = sent(
					await routes.getHaproxyProcessInfo!(ctx, {
						params,
						query,
						parsed: { body: undefined, fileParts: [], files: new Map() },
					}),
				);
				const pid = (JSON.parse(info.body ?? "{}") as { info?: { pid?: number } }).info?.pid;
				if (pid !== workerPid) {
					runtime = new Map();
					workerPid = pid;
				}
				return info;
			}
		}
		if (RUNTIME_READS.has(operation)) return runtimeRead(operation, params, query);
		const chunks: Buffer[] = [];
		for await (const chunk of req) chunks.push(chunk as Buffer);
		const parsed = await parseBody(req.headers, Buffer.concat(chunks));
		const handler = routes[operation];
		if (!handler) return sent(errorBody(501, `${operation} not served by the stand-in`));
		// Before and after: a read racing this write must not keep what it saw.
		if (!FILE_ONLY(operation, query)) runtime = new Map();
		let result: Sent;
		try {
			result = sent(await handler(ctx, { params, query, parsed }));
		} catch (e) {
			result = sent(errorBody(500, e instanceof Error ? e.message : String(e)));
		}
		if (!FILE_ONLY(operation, query)) runtime = new Map();
		return result;
	}

	const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
		// No URL object per request: the path, and the query only when there is one.
		const raw = req.url ?? "/";
		const q = raw.indexOf("?");
		const url = {
			pathname: q < 0 ? raw : raw.slice(0, q),
			searchParams: q < 0 ? NO_QUERY : new URLSearchParams(raw.slice(q + 1)),
		};
		if (url.pathname === "/_standin/counts") {
			res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(counts));
			return;
		}
		answer(req, url)
			.catch((e: unknown) => sent(errorBody(500, `stand-in crashed: ${String(e)}`)))
			.then((a) => {
				const headers: Record<string, string> = { "Configuration-Version": "1", ...(a.headers ?? {}) };
				if (a.body !== undefined) headers["Content-Type"] = "application/json";
				res.writeHead(a.status, headers).end(a.body);
			});
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	const port = (server.address() as AddressInfo).port;

	// Warm: every storage answer (parsed once per file for all nodes of this process) and every runtime
	// answer a cycle reads, from HAProxy, before the first request.
	await storageList();
	const info = await routes.getHaproxyProcessInfo!(ctx, {
		params: {},
		query: new URLSearchParams(),
		parsed: { body: undefined, fileParts: [], files: new Map() },
	});
	workerPid = (info.body as { info?: { pid?: number } } | undefined)?.info?.pid;
	const none = new URLSearchParams();
	const list = await runtimeRead("getAllCerts", {}, none);
	const names = (JSON.parse(list.body ?? "[]") as Array<{ storage_name: string }>).map((c) => c.storage_name);
	const limit = pLimit(64);
	await Promise.all(names.map((name) => limit(() => runtimeRead("getCert", { name }, none))));
	const lists = await runtimeRead("getAllCrtLists", {}, none);
	for (const { file } of JSON.parse(lists.body ?? "[]") as Array<{ file: string }>)
		await runtimeRead("getAllCrtListEntries", {}, new URLSearchParams({ name: file }));

	return {
		url: `http://127.0.0.1:${port}`,
		counts,
		close: async () => {
			server.closeAllConnections();
			await new Promise<void>((resolve) => server.close(() => resolve()));
			await client.close();
		},
	};
}

// --- the parent side -------------------------------------------------------------------------------------

export interface Standins {
	/** One URL per node, in the order given. */
	urls: string[];
	/** Process ids of the stand-in processes (for their CPU and memory). */
	pids: number[];
	/** Requests per operation over all nodes. */
	counts(): Promise<Record<string, number>>;
	close(): Promise<void>;
}

const child = fileURLToPath(new URL("./dpapi-standin-child.ts", import.meta.url));

/** Spreads the nodes over `processes` stand-in processes (round robin) and waits until all are warm. */
export async function spawnStandins(
	nodes: readonly StandinNode[],
	options: { processes: number; username: string; password: string; scratch: string; execArgv?: string[] },
): Promise<Standins> {
	const groups = Array.from({ length: Math.min(options.processes, nodes.length) }, (_, p) =>
		nodes.flatMap((n, i) => (i % options.processes === p ? [{ n, i }] : [])),
	);
	const urls: string[] = new Array(nodes.length);
	const procs = await Promise.all(
		groups.map(async (group, p) => {
			const jobFile = join(options.scratch, `standin-${p}.json`);
			const job: StandinJob = {
				nodes: group.map((g) => g.n),
				username: options.username,
				password: options.password,
			};
			await writeFile(jobFile, JSON.stringify(job));
			const proc = spawn(process.execPath, [...(options.execArgv ?? []), "--import", "tsx", child, jobFile], {
				stdio: ["pipe", "pipe", "inherit"],
			});
			const lines = createInterface({ input: proc.stdout });
			const ready = await new Promise<string[]>((resolve, reject) => {
				lines.on("line", (text) => {
					const m = JSON.parse(text) as { ready?: boolean; urls?: string[] };
					if (m.ready && m.urls) resolve(m.urls);
				});
				proc.once("exit", (code) => reject(new Error(`stand-in ${p} exited ${code} before it was ready`)));
			});
			ready.forEach((u, j) => {
				urls[group[j]!.i] = u;
			});
			return { proc, first: ready[0]!, all: ready };
		}),
	);
	return {
		urls,
		pids: procs.map((p) => p.proc.pid ?? 0),
		async counts() {
			const total: Record<string, number> = {};
			for (const p of procs) {
				for (const u of p.all) {
					const res = await fetch(`${u}/_standin/counts`);
					for (const [op, n] of Object.entries((await res.json()) as Record<string, number>))
						total[op] = (total[op] ?? 0) + n;
				}
			}
			return total;
		},
		async close() {
			await Promise.all(
				procs.map(
					(p) =>
						new Promise<void>((resolve) => {
							if (p.proc.exitCode !== null) return resolve();
							p.proc.once("exit", () => resolve());
							p.proc.stdin.end();
						}),
				),
			);
		},
	};
}
