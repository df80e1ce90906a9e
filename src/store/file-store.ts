/**
 * The state store on a local filesystem: one JSON file per key under `state_dir`, `{ "version": n, "value": ... }`,
 * mode 0600 (values may hold private keys), directories 0700. Writes go through writeFileAtomic; the directory
 * is locked to one process (lock.ts), so compare-and-swap only has to be serialised inside this process.
 * watch() reports changes made through this store (the lock means no other process writes).
 */
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { isTempName, sweepTempFiles, writeFileAtomic } from "../base/atomic-file.js";
import { CertificateeError } from "../errors.js";
import { stateKeySegments } from "./keys.js";
import { acquireStateLock } from "./lock.js";
import type { StateStore, Versioned } from "./types.js";

const SUFFIX = ".json";
/** Where issuers kept their own files before the store held their state (legacy.ts). */
const LEGACY_FOLDERS = ["acme", "local-ca"];

export interface FileStore extends StateStore {
	readonly dir: string;
	/** The file a key is kept in (for messages that must name it). */
	pathOf(key: string): string;
	/** Releases the lock; the store must not be used afterwards. */
	close(): void;
}

function keyPath(dir: string, key: string): string {
	return `${join(dir, ...stateKeySegments(key, (s) => s.endsWith(SUFFIX)))}${SUFFIX}`;
}

async function readEntry(path: string, key: string): Promise<Versioned | undefined> {
	let text: string;
	try {
		text = await readFile(path, "utf8");
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
		throw new CertificateeError("STATE_CORRUPT", `cannot read state file ${path} (${key})`, {
			context: { file: path },
			hint: `check its permissions; restore ${path} from a backup, or delete it to start over`,
			cause: e,
		});
	}
	try {
		const parsed = JSON.parse(text) as { version?: unknown; value?: unknown };
		if (typeof parsed.version !== "number" || !("value" in parsed))
			throw new Error("missing version or value");
		return { version: parsed.version, value: parsed.value };
	} catch (e) {
		// No cause: newer V8 versions quote the text around a JSON syntax error, and a record may hold a key.
		const where = /position \d+/.exec(String((e as Error).message))?.[0];
		const what = where ? `not valid JSON (at ${where})` : "not valid JSON";
		throw new CertificateeError("STATE_CORRUPT", `state file ${path} is ${what}`, {
			context: { file: path },
			hint: `restore ${path} from a backup, or delete it to start over (certificatee rebuilds it, re-issuing if needed)`,
		});
	}
}

async function listFiles(dir: string, prefix: string): Promise<string[]> {
	let entries: import("node:fs").Dirent[];
	try {
		entries = await readdir(dir, { withFileTypes: true });
	} catch {
		return [];
	}
	const keys: string[] = [];
	for (const entry of entries) {
		if (entry.name.startsWith(".") || isTempName(entry.name)) continue;
		if (entry.isDirectory())
			keys.push(...(await listFiles(join(dir, entry.name), `${prefix}${entry.name}/`)));
		else if (entry.name.endsWith(SUFFIX)) keys.push(`${prefix}${entry.name.slice(0, -SUFFIX.length)}`);
	}
	return keys;
}

export interface OpenOptions {
	/**
	 * Read without taking the lock, for commands that only look (`plan`, `status`) while the daemon runs.
	 * Reads are safe because every write is an atomic rename; put() is refused.
	 */
	readOnly?: boolean;
}

/**
 * Locks `stateDir` (STATE_LOCKED if another process holds it), removes leftovers of crashed writes, moves
 * what issuers kept in the old layout into records (legacy.ts), and opens it; with `readOnly`, opens it
 * without the lock, migrates nothing and refuses writes.
 */
export async function openFileStore(stateDir: string, options: OpenOptions = {}): Promise<FileStore> {
	const lock = options.readOnly ? undefined : await acquireStateLock(stateDir);
	if (lock) await sweepTempFiles(stateDir, { recursive: true });
	const watchers = new Set<{ prefix: string; onChange: (key: string) => void }>();
	const queues = new Map<string, Promise<unknown>>();

	function serialised<T>(key: string, work: () => Promise<T>): Promise<T> {
		const previous = queues.get(key) ?? Promise.resolve();
		const next = previous.then(work, work);
		const settled = next.then(
			() => undefined,
			() => undefined,
		);
		queues.set(key, settled);
		void settled.then(() => {
			if (queues.get(key) === settled) queues.delete(key);
		});
		return next;
	}

	const store: FileStore = {
		dir: stateDir,
		pathOf: (key) => keyPath(stateDir, key),
		get: async (key) => readEntry(keyPath(stateDir, key), key),
		location: (key) => keyPath(stateDir, key),
		async put(key, value, expectedVersion) {
			const path = keyPath(stateDir, key);
			if (!lock) {
				throw new CertificateeError("STATE_LOCKED", `state directory ${stateDir} is open read-only`, {
					context: { file: path },
					hint: "only the process holding the lock writes state",
				});
			}
			return serialised(key, async () => {
				const current = (await readEntry(path, key))?.version ?? 0;
				if (current !== expectedVersion) {
					throw new CertificateeError(
						"STATE_CONFLICT",
						`state "${key}" is at version ${current}, expected ${expectedVersion}`,
						{ context: { file: path }, hint: "read it again and retry", retryable: true },
					);
				}
				const version = current + 1;
				try {
					await writeFileAtomic(path, `${JSON.stringify({ version, value }, null, 2)}\n`, { mkdir: true });
				} catch (e) {
					// A full disk, a directory made read-only or removed under the daemon: it may clear by itself, so
					// the caller retries soon (a renewal in 1 min), and the operator reads what and where.
					const code = (e as NodeJS.ErrnoException).code ?? "error";
					throw new CertificateeError(
						"STATE_UNWRITABLE",
						`cannot write state file ${path} (${key}): ${code}`,
						{
							context: { file: path, operation: "write state" },
							hint:
								code === "ENOSPC"
									? `free space on the filesystem of ${stateDir}`
									: `check that ${stateDir} and its folders are writable directories for the user certificatee runs as`,
							retryable: true,
							cause: e,
						},
					);
				}
				for (const w of watchers) if (key.startsWith(w.prefix)) w.onChange(key);
				return version;
			});
		},
		async list(prefix) {
			const base = prefix.replace(/\/?[^/]*$/, "");
			const start = base === "" ? stateDir : join(stateDir, ...base.split("/"));
			const keys = await listFiles(start, base === "" ? "" : `${base}/`);
			return keys.filter((k) => k.startsWith(prefix)).sort();
		},
		watch(prefix, onChange) {
			const w = { prefix, onChange };
			watchers.add(w);
			return () => watchers.delete(w);
		},
		close() {
			watchers.clear();
			lock?.release();
		},
	};
	if (lock && LEGACY_FOLDERS.some((f) => existsSync(join(stateDir, f)))) {
		// Loaded only when there is something to move: the store stays light to open (records pull in zod).
		const { migrateLegacyLayout } = await import("./legacy.js");
		try {
			await migrateLegacyLayout(stateDir, store);
		} catch (e) {
			lock.release();
			throw e;
		}
	}
	return store;
}
