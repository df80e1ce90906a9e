/**
 * A real HAProxy in a temp directory, for every test that needs one: Debian's 2.6, or the one `HAPROXY_BIN`
 * names (CI runs the HAProxy tests against 2.8, 3.0, 3.2 and 3.4 too: docs/testing.md).
 *
 * Master-worker (`-W -S master.sock`), an admin stats socket (`level admin`), and one TLS frontend on a
 * free 127.0.0.1 port: `bind ... ssl crt <default.pem> crt <crtDir> crt-list <crtList> [crt <pinned>...]`.
 * Every path in the config is absolute, so HAProxy's certificate names are absolute paths
 * (`<crtDir>/a.pem`), the crt directory's crt-list name is `crtDir` (no trailing slash).
 * The default certificate sits outside the crt directory so every file in it can be removed.
 *
 *   const h = await startHaproxy({ crtDir: { "a.pem": leaf.combinedPem } });
 *   ... h.address, h.adminSocket, await h.workerPid(), await h.reload(), await h.stop();
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createTestCa, issueTestLeaf } from "./certs.js";
import { freePorts } from "./ports.js";

/** The HAProxy every test starts: `HAPROXY_BIN` (absolute, or relative to the project's root), else Debian's. */
export const HAPROXY_BIN = resolve(process.env.HAPROXY_BIN ?? "/usr/sbin/haproxy");

/** Its version, from `haproxy -v` ("2.6.12", "3.4.0"): tests whose answer depends on it branch on this. */
export const HAPROXY_VERSION = haproxyVersion(HAPROXY_BIN);

/** HAProxy's line as a number (2.6 → 206, 3.4 → 304), for comparisons: `haproxyLine() >= 304`. */
export function haproxyLine(version = HAPROXY_VERSION): number {
	const [major = "0", minor = "0"] = version.split(".");
	return Number(major) * 100 + Number(minor);
}

function haproxyVersion(bin: string): string {
	let out: string;
	try {
		out = execFileSync(bin, ["-v"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
	} catch (e) {
		throw new Error(
			`HAProxy ${bin} cannot run (${(e as Error).message.split("\n")[0]}): install Debian's haproxy, or set HAPROXY_BIN to an HAProxy binary (e.g. ../shared/haproxy/3.4.0/haproxy)`,
		);
	}
	const version = /^HAProxy version (\d+\.\d+(?:\.\d+)?)/m.exec(out)?.[1];
	if (version === undefined)
		throw new Error(`${bin} -v does not print an HAProxy version: ${out.slice(0, 120)}`);
	return version;
}

export interface CrtListLine {
	/** File name inside `<dir>/list/`, e.g. "l1.pem". */
	file: string;
	pem: string;
	/** SSL options without brackets, e.g. "alpn h2". */
	sslOptions?: string;
	filters?: string[];
}

export interface HaproxyOptions {
	/** Files written into the crt directory at start: file name -> combined PEM. */
	crtDir?: Record<string, string>;
	/** Lines of the crt-list file (certificates written into `<dir>/list/`). */
	crtList?: CrtListLine[];
	/** PEM of the bind's default certificate (first `crt`); a self-signed `default.invalid` one if absent. */
	defaultPem?: string;
	/** Extra direct `crt <file>` entries on the bind line (cannot be deleted at runtime): file -> PEM. */
	pinned?: Record<string, string>;
	/** Where the pinned files go: `<dir>/pinned/` (default); beside the crt-list's certificates (`<dir>/list/`,
	 * so a Data Plane API double over that directory holds both); or in the crt directory itself (then HAProxy
	 * loads them twice: through the directory and through their own `crt` line). */
	pinnedIn?: "pinned" | "crt-list" | "crt-dir";
	/** `tune.bufsize`; HAProxy's default (16384) when absent. */
	bufsize?: number;
	/** `stats timeout`. Default "10s" (HAProxy's default). */
	statsTimeout?: string;
	/** Also open the admin stats socket on a free 127.0.0.1 TCP port (`adminTcp`). */
	tcpStatsSocket?: boolean;
	/** Extra configuration appended verbatim (more frontends, binds); `{dir}` is replaced by the temp dir. */
	extraConfig?: string;
	/**
	 * HAProxy 3.x layouts. `sections`: configuration placed before the frontend (crt-store, acme sections);
	 * `globalLines`: more lines in `global`; `frontendLines`: more lines in the TLS frontend (`ssl-f-use ...`);
	 * `bindExtra`: more arguments on its bind line (`crt "@web/site-a"`). `{dir}` is replaced by the temp dir.
	 */
	sections?: string;
	globalLines?: string[];
	frontendLines?: string[];
	bindExtra?: string;
	/**
	 * Leave `crt <crtDir>` / `crt-list <crtList>` off the bind line (a crt-store or ssl-f-use only layout), or
	 * every crt argument (`bindDefault: false`, the default certificate then comes first as `ssl-f-use crt
	 * {dir}/default.pem`): HAProxy 3.2.0 leaves ssl-f-use certificates Unused on a bind that has its own crt.
	 */
	bindDefault?: boolean;
	bindCrtDir?: boolean;
	bindCrtList?: boolean;
	/** The HAProxy binary (default HAPROXY_BIN): a version of the matrix, see haproxy-builds.ts. */
	bin?: string;
	/** More files at start: path relative to the temp dir (directories made) -> content, mode 0600. */
	files?: Record<string, string>;
}

export interface HaproxyWorker {
	pid: number;
	uptimeSec: number;
}

export interface Haproxy {
	/** Temp directory holding config, sockets and certificates. */
	readonly dir: string;
	/** The binary running it (`haproxy -c` of the invariant uses the same). */
	readonly bin: string;
	/** `<dir>/haproxy.cfg`, every path in it absolute. */
	readonly configPath: string;
	readonly crtDir: string;
	readonly crtListPath: string;
	readonly pinnedDir: string;
	readonly adminSocket: string;
	readonly masterSocket: string;
	/** "127.0.0.1:<port>" of the admin stats socket over TCP, with `tcpStatsSocket`. */
	readonly adminTcp?: string;
	/** TLS port on 127.0.0.1. */
	readonly port: number;
	/** "127.0.0.1:<port>". */
	readonly address: string;
	/** Pid of the master process. */
	readonly masterPid: number;
	/** Current worker (from `show info` on a fresh admin-socket connection). */
	worker(): Promise<HaproxyWorker>;
	workerPid(): Promise<number>;
	/** One command on a fresh admin-socket connection (non-interactive). */
	command(line: string): Promise<string>;
	/** Reloads on purpose (SIGUSR2 to the master, as the master CLI's `reload`) and waits until a new worker
	 * answers on the admin socket, the TLS port and the master CLI. Returns it. */
	reload(): Promise<HaproxyWorker>;
	/** True while the master process runs. */
	alive(): boolean;
	/** HAProxy's stdout+stderr so far. */
	log(): string;
	/** Stops HAProxy (SIGTERM to the master, SIGKILL after 5 s) and removes the temp dir. */
	stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (below the ephemeral range: see ports.ts). */
export async function freePort(): Promise<number> {
	const [port] = await freePorts(1);
	return port as number;
}

/** Sends one line to a unix socket in non-interactive mode and returns everything until EOF. */
export function socketCommand(path: string, line: string, timeoutMs = 5_000): Promise<string> {
	return new Promise((resolve, reject) => {
		const socket = createConnection(path);
		let data = "";
		const timer = setTimeout(() => {
			socket.destroy();
			reject(new Error(`no answer from ${path} to ${line} within ${timeoutMs} ms`));
		}, timeoutMs);
		socket.on("connect", () => {
			socket.write(`${line}\n`);
			// The master CLI answers only after the client half-closes; the worker socket does not mind.
			socket.end();
		});
		socket.on("data", (chunk) => {
			data += chunk.toString("utf8");
		});
		socket.on("error", (e) => {
			clearTimeout(timer);
			reject(e);
		});
		socket.on("close", () => {
			clearTimeout(timer);
			resolve(data);
		});
	});
}

async function readWorker(adminSocket: string): Promise<HaproxyWorker> {
	const text = await socketCommand(adminSocket, "show info");
	const pid = /^Pid: (\d+)$/m.exec(text)?.[1];
	const uptime = /^Uptime_sec: (\d+)$/m.exec(text)?.[1];
	if (pid === undefined) throw new Error(`unexpected show info answer: ${text.slice(0, 200)}`);
	return { pid: Number(pid), uptimeSec: Number(uptime ?? 0) };
}

async function writeSecret(path: string, pem: string): Promise<void> {
	await writeFile(path, pem, { mode: 0o600 });
	await chmod(path, 0o600);
}

function config(o: {
	dir: string;
	port: number;
	crtDir: string;
	crtListPath: string;
	defaultPath: string;
	pinned: string[];
	bufsize?: number;
	statsTimeout: string;
	extraConfig?: string;
	adminTcpPort?: number;
	layout: HaproxyOptions;
}): string {
	const at = (text: string) => text.replaceAll("{dir}", o.dir);
	const crts = [
		...(o.layout.bindDefault === false ? [] : [`crt ${o.defaultPath}`]),
		...(o.layout.bindCrtDir === false ? [] : [`crt ${o.crtDir}`]),
		...(o.layout.bindCrtList === false ? [] : [`crt-list ${o.crtListPath}`]),
		...o.pinned.map((p) => `crt ${p}`),
		...(o.layout.bindExtra ? [at(o.layout.bindExtra)] : []),
	];
	return [
		"global",
		...(o.layout.globalLines ?? []).map((l) => `    ${at(l)}`),
		`    stats socket unix@${join(o.dir, "admin.sock")} mode 600 level admin expose-fd listeners`,
		...(o.adminTcpPort ? [`    stats socket ipv4@127.0.0.1:${o.adminTcpPort} level admin`] : []),
		`    stats timeout ${o.statsTimeout}`,
		...(o.bufsize ? [`    tune.bufsize ${o.bufsize}`] : []),
		"    log stderr format short local0 notice",
		"",
		"defaults",
		"    mode http",
		"    log global",
		"    timeout connect 5s",
		"    timeout client 30s",
		"    timeout server 30s",
		"",
		at(o.layout.sections ?? ""),
		"",
		"frontend fe_tls",
		`    bind 127.0.0.1:${o.port} ssl ${crts.join(" ")}`,
		...(o.layout.bindDefault === false ? [`    ssl-f-use crt ${o.defaultPath}`] : []),
		...(o.layout.frontendLines ?? []).map((l) => `    ${at(l)}`),
		'    http-request return status 200 content-type text/plain string "ok\\n"',
		"",
		(o.extraConfig ?? "").replaceAll("{dir}", o.dir),
		"",
	].join("\n");
}

/** Starts HAProxy and waits until its worker answers and the TLS port accepts connections. */
export async function startHaproxy(options: HaproxyOptions = {}): Promise<Haproxy> {
	const dir = await mkdtemp(join(tmpdir(), "certificatee-haproxy-"));
	const crtDir = join(dir, "certs");
	const listDir = join(dir, "list");
	const pinnedDir = join(dir, "pinned");
	const crtListPath = join(dir, "certs.list");
	const defaultPath = join(dir, "default.pem");
	await Promise.all([mkdir(crtDir), mkdir(listDir), mkdir(pinnedDir)]);

	let defaultPem = options.defaultPem;
	if (defaultPem === undefined) {
		const ca = await createTestCa("harness default");
		defaultPem = (await issueTestLeaf(ca, { names: ["default.invalid"] })).combinedPem;
	}
	await writeSecret(defaultPath, defaultPem);
	for (const [file, pem] of Object.entries(options.crtDir ?? {})) await writeSecret(join(crtDir, file), pem);
	for (const [file, content] of Object.entries(options.files ?? {})) {
		await mkdir(dirname(join(dir, file)), { recursive: true });
		await writeSecret(join(dir, file), content);
	}
	const listLines: string[] = [];
	for (const line of options.crtList ?? []) {
		const path = join(listDir, line.file);
		await writeSecret(path, line.pem);
		const parts = [path];
		if (line.sslOptions) parts.push(`[${line.sslOptions}]`);
		parts.push(...(line.filters ?? []));
		listLines.push(parts.join(" "));
	}
	await writeFile(crtListPath, listLines.map((l) => `${l}\n`).join(""));
	const pinned: string[] = [];
	for (const [file, pem] of Object.entries(options.pinned ?? {})) {
		const path = join(
			{ pinned: pinnedDir, "crt-list": listDir, "crt-dir": crtDir }[options.pinnedIn ?? "pinned"],
			file,
		);
		await writeSecret(path, pem);
		pinned.push(path);
	}

	const adminSocket = join(dir, "admin.sock");
	const masterSocket = join(dir, "master.sock");
	const configPath = join(dir, "haproxy.cfg");
	let lastError: unknown;
	for (let attempt = 0; attempt < 3; attempt++) {
		const port = await freePort();
		const adminTcpPort = options.tcpStatsSocket ? await freePort() : undefined;
		await writeFile(
			configPath,
			config({
				dir,
				port,
				crtDir,
				crtListPath,
				defaultPath,
				pinned,
				bufsize: options.bufsize,
				statsTimeout: options.statsTimeout ?? "10s",
				extraConfig: options.extraConfig,
				adminTcpPort,
				layout: options,
			}),
		);
		const child = spawn(
			options.bin ?? HAPROXY_BIN,
			["-W", "-S", `${masterSocket},mode,600`, "-f", configPath],
			{
				cwd: dir,
				stdio: ["ignore", "pipe", "pipe"],
			},
		);
		try {
			const instance = await ready({
				child,
				bin: options.bin ?? HAPROXY_BIN,
				dir,
				port,
				crtDir,
				crtListPath,
				pinnedDir,
				adminSocket,
				masterSocket,
			});
			return adminTcpPort ? { ...instance, adminTcp: `127.0.0.1:${adminTcpPort}` } : instance;
		} catch (e) {
			lastError = e;
			await kill(child);
		}
	}
	await rm(dir, { recursive: true, force: true });
	throw lastError;
}

async function kill(child: ChildProcess): Promise<void> {
	if (child.exitCode !== null || child.signalCode !== null) return;
	const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
	child.kill("SIGTERM");
	const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
	await exited;
	clearTimeout(timer);
}

async function waitFor<T>(
	what: string,
	fn: () => Promise<T>,
	timeoutMs: number,
	log: () => string,
): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		try {
			return await fn();
		} catch (e) {
			if (Date.now() > deadline) throw new Error(`HAProxy: ${what} timed out: ${String(e)}\n${log()}`);
			await sleep(25);
		}
	}
}

function tcpReady(port: number): Promise<void> {
	return new Promise((resolve, reject) => {
		const socket = createConnection(port, "127.0.0.1");
		socket.once("connect", () => {
			socket.destroy();
			resolve();
		});
		socket.once("error", reject);
	});
}

async function ready(p: {
	child: ChildProcess;
	bin: string;
	dir: string;
	port: number;
	crtDir: string;
	crtListPath: string;
	pinnedDir: string;
	adminSocket: string;
	masterSocket: string;
}): Promise<Haproxy> {
	let output = "";
	p.child.stdout?.on("data", (d: Buffer) => {
		output += d.toString();
	});
	p.child.stderr?.on("data", (d: Buffer) => {
		output += d.toString();
	});
	const log = () => output;
	const exitedEarly = () => {
		if (p.child.exitCode !== null || p.child.signalCode !== null) {
			throw new Error(`HAProxy exited (${p.child.exitCode ?? p.child.signalCode}):\n${output}`);
		}
	};
	await waitFor(
		"worker start",
		async () => {
			exitedEarly();
			const worker = await readWorker(p.adminSocket);
			await tcpReady(p.port);
			if (!(await socketCommand(p.masterSocket, "show proc")).includes(String(worker.pid))) {
				throw new Error("master CLI not ready");
			}
		},
		20_000,
		log,
	).catch((e) => {
		exitedEarly();
		throw e;
	});

	let stopped = false;
	const instance: Haproxy = {
		dir: p.dir,
		bin: p.bin,
		configPath: join(p.dir, "haproxy.cfg"),
		crtDir: p.crtDir,
		crtListPath: p.crtListPath,
		pinnedDir: p.pinnedDir,
		adminSocket: p.adminSocket,
		masterSocket: p.masterSocket,
		port: p.port,
		address: `127.0.0.1:${p.port}`,
		masterPid: p.child.pid ?? 0,
		worker: () => readWorker(p.adminSocket),
		workerPid: async () => (await readWorker(p.adminSocket)).pid,
		command: (line) => socketCommand(p.adminSocket, line),
		alive: () => p.child.exitCode === null && p.child.signalCode === null,
		log,
		async reload() {
			const before = await readWorker(p.adminSocket);
			// SIGUSR2 to the master is what `reload` on the master CLI does, without depending on that
			// socket (the master re-executes itself on reload and refuses connections meanwhile).
			process.kill(p.child.pid ?? 0, "SIGUSR2");
			return waitFor(
				"reload",
				async () => {
					exitedEarly();
					const now = await readWorker(p.adminSocket);
					if (now.pid === before.pid) throw new Error("still the old worker");
					await tcpReady(p.port);
					// The master CLI is back too, and knows the new worker.
					const proc = await socketCommand(p.masterSocket, "show proc");
					if (!proc.includes(String(now.pid))) throw new Error("master CLI not ready");
					return now;
				},
				20_000,
				log,
			);
		},
		async stop() {
			if (stopped) return;
			stopped = true;
			await kill(p.child);
			await rm(p.dir, { recursive: true, force: true });
		},
	};
	return instance;
}
