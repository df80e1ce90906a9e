/**
 * The real file state store for tests that build issuers: stateAt(dir) is a StateStore over `dir` that opens
 * (and locks) it on first use, one per directory per test file, as the daemon holds one. Usable where an
 * issuer is created synchronously: createAcmeIssuer(config, { store: stateAt(dir) }). test/setup.ts closes
 * every store after each test file; closeStateAt(dir) releases one earlier (before another process or store
 * opens the same directory).
 */
import { join } from "node:path";
import { type FileStore, openFileStore } from "../../src/store/file-store.js";
import type { StateStore } from "../../src/store/types.js";

const stores = new Map<string, Promise<FileStore>>();

export function stateAt(dir: string): StateStore {
	const opened = () => {
		let store = stores.get(dir);
		if (!store) {
			store = openFileStore(dir);
			stores.set(dir, store);
			// An open that failed (the directory cannot be created yet) is tried again on next use.
			store.catch(() => stores.delete(dir));
		}
		return store;
	};
	return {
		get: async (key) => (await opened()).get(key),
		put: async (key, value, version) => (await opened()).put(key, value, version),
		list: async (prefix) => (await opened()).list(prefix),
		watch() {
			throw new Error("stateAt(): watch is not available on a lazily opened store; use openFileStore");
		},
		// The file store's own rule (file-store.ts keyPath), without opening it.
		location: (key) => `${join(dir, ...key.split("/"))}.json`,
	};
}

export async function closeStateAt(dir: string): Promise<void> {
	const store = stores.get(dir);
	stores.delete(dir);
	(await store)?.close();
}

export async function closeStateStores(): Promise<void> {
	for (const dir of [...stores.keys()]) await closeStateAt(dir);
}
