/**
 * The reload-safety invariant (issue 11), checked at the end of every HAProxy-target test:
 * after any cycle, `haproxy -c -f <cfg>` passes, and a reload serves, for every SNI name, the same
 * certificate (serial) as before it. A change that lives only in HAProxy's memory, or a file deleted while
 * a config or crt-list file still names it, breaks this.
 *
 * The names probed are the union of what the running worker holds (every DNS name of every certificate in
 * `show ssl cert`) and what a reload would load (every DNS name of every certificate the configuration's
 * `crt`/`crt-list` arguments name on disk, plus crt-list SNI filters), so a certificate that exists on only
 * one side is probed too. A wildcard is probed as one label below it. Probes go to the harness's TLS bind
 * (`h.address`), which carries every crt source the harness configures; binds added by `extraConfig` are not
 * probed. After the reload, probing waits until the old worker has closed its listener, so every probe
 * reaches the new worker.
 *
 *   await assertReloadSafe(h);                       // every name HAProxy holds or would load
 *   await assertReloadSafe(h, { names: ["a.test"] }); // plus these
 *   await assertReloadSafe(h, { except: ["big.test"] }); // a name the test deliberately leaves to a reload
 */
import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { readdir, readFile, readlink, stat } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import pLimit from "p-limit";
import { normaliseSerial } from "../../src/certificates/index.js";
import { probeServed } from "../../src/probe/index.js";
import { RuntimeClient } from "../../src/targets/haproxy-runtime/socket.js";
import type { Haproxy } from "./haproxy.js";

const run = promisify(execFile);

export interface ReloadSafeOptions {
	/** More SNI names to compare (besides every name HAProxy holds or would load). */
	names?: readonly string[];
	/** Names not to compare (e.g. one a test deliberately leaves to a reload). */
	except?: readonly string[];
}

/** `haproxy -c` on the instance's configuration: throws with HAProxy's alerts when it fails. */
export async function assertConfigValid(h: Haproxy): Promise<void> {
	try {
		// Not `-q`: with it HAProxy 2.6 prints nothing at all when the check fails.
		await run(h.bin, ["-c", "-f", h.configPath], { cwd: h.dir });
	} catch (e) {
		const err = e as { stdout?: string; stderr?: string; message: string };
		const output = `${err.stdout ?? ""}${err.stderr ?? ""}`;
		const alerts = output.split("\n").filter((l) => /\[(ALERT|WARNING)\]/.test(l));
		throw new Error(
			`haproxy -c -f ${h.configPath} failed:\n${(alerts.length > 0 ? alerts.join("\n") : output) || err.message}`,
		);
	}
}

/** The SNI name that reaches a certificate name: a wildcard as one label under it; undefined for an IP. */
function probeName(name: string): string | undefined {
	if (/^[\d.:]+$/.test(name) || name.startsWith("!")) return undefined;
	return name.startsWith("*.") ? `reload-probe${name.slice(1)}` : name;
}

function addProbeNames(into: Set<string>, names: Iterable<string>): void {
	for (const n of names) {
		const p = probeName(n);
		if (p !== undefined) into.add(p);
	}
}

/** What one side (the running worker, or the files a reload would load) holds: names, and who has each serial. */
interface Inventory {
	names: Set<string>;
	/** serial -> the certificate names (paths relative to the instance's dir) holding it. */
	holders: Map<string, Set<string>>;
}

const emptyInventory = (): Inventory => ({ names: new Set(), holders: new Map() });

function hold(inv: Inventory, serial: string | undefined, holder: string): void {
	if (serial === undefined) return;
	const set = inv.holders.get(serial) ?? new Set<string>();
	set.add(holder);
	inv.holders.set(serial, set);
}

const relative = (h: Haproxy, path: string) =>
	path.startsWith(`${h.dir}/`) ? path.slice(h.dir.length + 1) : path;

async function memoryInventory(h: Haproxy): Promise<Inventory> {
	const inv = emptyInventory();
	const client = new RuntimeClient({ address: h.adminSocket, name: "invariant" });
	try {
		const { names } = await client.showCerts();
		for (const name of names) {
			const d = await client.showCert(name);
			addProbeNames(inv.names, d?.sans ?? []);
			hold(inv, d?.serial, relative(h, name));
		}
		return inv;
	} finally {
		await client.close();
	}
}

/** Every SNI name the running worker could be asked for: each certificate's DNS names in `show ssl cert`. */
export async function servedNames(h: Haproxy): Promise<string[]> {
	return [...(await memoryInventory(h)).names].sort();
}

/** The first certificate in a PEM file; undefined when the file is missing or holds none. */
async function leaf(path: string): Promise<{ names: string[]; serial: string } | undefined> {
	try {
		const pem = await readFile(path, "utf8");
		const block = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(pem)?.[0];
		if (block === undefined) return undefined;
		const cert = new X509Certificate(block);
		const names = (cert.subjectAltName ?? "")
			.split(", ")
			.filter((s) => s.startsWith("DNS:"))
			.map((s) => s.slice(4));
		return { names, serial: normaliseSerial(cert.serialNumber) };
	} catch {
		return undefined; // a missing or broken file is `haproxy -c`'s to report
	}
}

/** Files HAProxy loads from a `crt <dir>`: all but dotfiles and the .key/.ocsp/.issuer/.sctl companions. */
async function crtDirFiles(dir: string): Promise<string[]> {
	const entries = await readdir(dir).catch(() => [] as string[]);
	return entries
		.filter((f) => !f.startsWith(".") && !/\.(key|ocsp|issuer|sctl)$/.test(f))
		.map((f) => join(dir, f));
}

/** What a reload would load: the certificates (and crt-list SNI filters) the configuration's binds name. */
async function diskInventory(h: Haproxy): Promise<Inventory> {
	const inv = emptyInventory();
	const add = async (path: string) => {
		const l = await leaf(path);
		addProbeNames(inv.names, l?.names ?? []);
		hold(inv, l?.serial, relative(h, path));
	};
	const cfg = await readFile(h.configPath, "utf8");
	for (const line of cfg.split("\n")) {
		const words = line.trim().split(/\s+/);
		if (words[0] !== "bind") continue;
		for (let i = 1; i < words.length - 1; i++) {
			const arg = words[i + 1] as string;
			if (words[i] === "crt") {
				const isDir = await stat(arg).then(
					(st) => st.isDirectory(),
					() => false,
				);
				for (const file of isDir ? await crtDirFiles(arg) : [arg]) await add(file);
			} else if (words[i] === "crt-list") {
				const list = await readFile(arg, "utf8").catch(() => "");
				for (const entry of list.split("\n")) {
					const t = entry.trim();
					if (t === "" || t.startsWith("#")) continue;
					const [path, ...filters] = t.replace(/\[[^\]]*\]/, " ").split(/\s+/);
					await add(path as string);
					addProbeNames(inv.names, filters);
				}
			}
		}
	}
	return inv;
}

/** Every SNI name a reload would load: the certificates (and crt-list filters) the configuration names. */
export async function configuredNames(h: Haproxy): Promise<string[]> {
	return [...(await diskInventory(h)).names].sort();
}

/** "101175B7 (pinned/legacy_pin.pem)": a serial and who holds it, in memory and on disk. */
function describeSerial(serial: string | undefined, memory: Inventory, disk: Inventory): string {
	if (serial === undefined) return "-";
	const inMemory = memory.holders.get(serial) ?? new Set<string>();
	const onDisk = disk.holders.get(serial) ?? new Set<string>();
	const who = [...new Set([...inMemory, ...onDisk])]
		.sort()
		.map((f) =>
			inMemory.has(f) && onDisk.has(f) ? f : `${f} ${inMemory.has(f) ? "in memory only" : "on disk only"}`,
		);
	return who.length > 0 ? `${serial} (${who.join(", ")})` : serial;
}

/**
 * A few probes at a time, as the reconciler probes: one at a time, a certificate with 191 names took 17 s of a
 * test's 60 s on a loaded 2-core machine, each handshake waiting on two processes' turns in the scheduler.
 */
const PROBE_CONCURRENCY = 8;

async function servedSerials(h: Haproxy, names: readonly string[]): Promise<Record<string, string>> {
	const limit = pLimit(PROBE_CONCURRENCY);
	const serials = await Promise.all(
		names.map((sni) =>
			limit(() =>
				probeServed({ address: h.address, sni }).then(
					(p) => p.serial,
					(e: unknown) => `probe failed: ${(e as Error).message}`,
				),
			),
		),
	);
	return Object.fromEntries(names.map((sni, i) => [sni, serials[i] as string]));
}

/** Inodes of the TCP sockets listening on the instance's TLS port. */
async function listenerInodes(h: Haproxy): Promise<Set<string>> {
	const port = h.port.toString(16).toUpperCase().padStart(4, "0");
	const inodes = new Set<string>();
	for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
		const text = await readFile(table, "utf8").catch(() => "");
		for (const row of text.split("\n").slice(1)) {
			const cols = row.trim().split(/\s+/);
			if (cols[1]?.endsWith(`:${port}`) && cols[3] === "0A" && cols[9] !== undefined) inodes.add(cols[9]);
		}
	}
	return inodes;
}

/** True while `pid` still holds one of these sockets (it could still accept a probe meant for the new worker). */
async function holdsAny(pid: number, inodes: Set<string>): Promise<boolean> {
	const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
	for (const fd of fds) {
		const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "");
		const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
		if (inode !== undefined && inodes.has(inode)) return true;
	}
	return false;
}

/** Reloads and waits until the old worker no longer listens, so every later probe reaches the new worker. */
async function reloadToNewWorker(h: Haproxy): Promise<void> {
	const old = await h.workerPid();
	const inodes = await listenerInodes(h);
	await h.reload();
	const deadline = Date.now() + 10_000;
	while (await holdsAny(old, inodes)) {
		if (Date.now() > deadline)
			throw new Error(`old worker ${old} still listens on ${h.address} after a reload`);
		await sleep(25);
	}
}

/** Checks the configuration, reloads, and asserts every name serves the same serial as before. */
export async function assertReloadSafe(h: Haproxy, options: ReloadSafeOptions = {}): Promise<void> {
	const except = new Set(options.except ?? []);
	const memory = await memoryInventory(h);
	const disk = await diskInventory(h);
	const names = [...new Set([...memory.names, ...disk.names, ...(options.names ?? [])])]
		.filter((n) => !except.has(n))
		.sort();
	// The check reads only files: it runs while the running worker is probed.
	const [before] = await Promise.all([servedSerials(h, names), assertConfigValid(h)]);
	await reloadToNewWorker(h);
	const after = await servedSerials(h, names);
	const changed = names
		.filter((n) => before[n] !== after[n])
		.map(
			(n) =>
				`  ${n}: ${describeSerial(before[n], memory, disk)} -> ${describeSerial(after[n], memory, disk)}`,
		);
	if (changed.length > 0) {
		throw new Error(
			`reload changed what ${h.address} serves (${changed.length} of ${names.length} names; serial before -> after):\n${changed.join("\n")}`,
		);
	}
}

/**
 * The invariant on a HAProxy a file's tests share (afterAll, once its writers have stopped), then the HAProxy
 * stopped, whatever the check said.
 */
export async function stopReloadSafe(h: Haproxy | undefined, options: ReloadSafeOptions = {}): Promise<void> {
	if (h === undefined) return;
	try {
		await assertReloadSafe(h, options);
	} finally {
		await h.stop();
	}
}
