/**
 * The StateStore on etcd, for a cluster of certificatee members: record `<key>` lives at `<prefix>state/<key>`,
 * sealed with AES-256-GCM (encryption.ts) so etcd never holds a private key in the clear, and bound to the
 * version it was written as: a value whose sealed version is not etcd's version of the key, or older than one
 * this member has seen, was written by someone else (a rollback or a replay) and is refused. A record's version is
 * etcd's per-key `version` (1 on create, +1 per put); put() is one Txn `If(version == expected) Then(put)`, and a
 * fenced put also compares the create_revision of the fence key (the leader's election key, or a member's own
 * key) in the same Txn, so a deposed writer's late write changes nothing however long gRPC held it.
 * Every RPC goes through the connection (etcd.ts), which gives it a deadline.
 */
import type { IKeyValue, IResponseOp, Watcher } from "etcd3";
import { CertificateeError } from "../errors.js";
import { stateKeySegments } from "../store/keys.js";
import type { StateStore, Versioned } from "../store/types.js";
import { ENCRYPTION_KEY_ENV, ENCRYPTION_KEY_FIELD, isSealed, open, seal } from "./encryption.js";
import { clusterUnavailable, type EtcdConnection } from "./etcd.js";
import type { Fence } from "./fence.js";

const STATE = "state/";
/** Backoff of a watch that cannot (re)start while etcd is unreachable. */
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 5000;

export interface EtcdStore extends StateStore {
	/**
	 * A view whose every put also compares create_revision(fence.key) == fence.createRevision in the same Txn.
	 * fence() undefined (we hold nothing) or a failed compare: CLUSTER_FENCED (not retryable), nothing written,
	 * counted in fencedWrites().
	 */
	fenced(fence: () => Fence | undefined): StateStore;
	fencedWrites(): number;
	/**
	 * How stale the watches may be, in seconds: for a watch that is not connected (etcd unreachable, or reconnecting
	 * and re-reading its prefix), the time since it was last known to be current; 0 when every watch is current.
	 */
	watchLagSeconds(): number;
	/** Stops the watches. The connection stays open: its owner closes it. */
	close(): Promise<void>;
}

export interface EtcdStoreOptions {
	/** 32 bytes (loadEncryptionKey). */
	encryptionKey: Buffer;
	/** Milliseconds since the epoch; for the watch lag. */
	now?: () => number;
}

interface ActiveWatch {
	/** When the watch was last known current; undefined while it is. */
	behindSince: number | undefined;
	stop(): Promise<void>;
}

export function createEtcdStore(conn: EtcdConnection, options: EtcdStoreOptions): EtcdStore {
	const { encryptionKey } = options;
	const now = options.now ?? Date.now;
	const watches = new Set<ActiveWatch>();
	let fencedCount = 0;
	// The highest version seen (read or written) per key: a value going back below it is a rollback.
	const seen = new Map<string, number>();
	const record = (key: string) => ({ prefix: conn.settings.prefix, key });

	const location = (key: string) => `etcd:${conn.settings.prefix}${STATE}${key}`;

	async function rpc<T>(operation: string, work: () => Promise<T>): Promise<T> {
		try {
			return await work();
		} catch (e) {
			throw clusterUnavailable(conn.settings, operation, e);
		}
	}

	function badValue(key: string, what: string, hint?: string): CertificateeError {
		return new CertificateeError("CLUSTER_BAD_VALUE", `state "${key}" at ${location(key)} ${what}`, {
			context: { field: ENCRYPTION_KEY_FIELD, endpoint: conn.settings.endpoints.join(","), operation: "get" },
			hint:
				hint ??
				`every member must use the same ${ENCRYPTION_KEY_FIELD} (or ${ENCRYPTION_KEY_ENV}): restore the key it was written with, or delete ${location(key)} to start over (certificatee rebuilds it, re-issuing if needed)`,
		});
	}

	function rolledBack(key: string, what: string): CertificateeError {
		return badValue(
			key,
			`${what}: refused (a rollback or a replay of an older value by someone who can write etcd)`,
			`find who writes to etcd besides the members and restore a good value, or delete ${location(key)} and restart the members to start over (certificatee rebuilds it, re-issuing if needed)`,
		);
	}

	/** Refuses a value that etcd did not get from certificatee's own put at this version, or that went back. */
	function checkVersion(key: string, seq: number | undefined, version: number): void {
		const highest = seen.get(key);
		if (seq === undefined) {
			// Format 1, from before the upgrade: readable, unless this key was already seen in format 2.
			if (highest !== undefined)
				throw rolledBack(
					key,
					`holds a value in the old format (unversioned) after version ${highest} was seen`,
				);
			return;
		}
		if (seq !== version)
			throw rolledBack(
				key,
				`holds a value sealed as version ${seq}, but etcd's version of the key is ${version}`,
			);
		if (highest !== undefined && seq < highest)
			throw rolledBack(
				key,
				`went back to version ${seq} after version ${highest} was seen (deleted and written again)`,
			);
		seen.set(key, seq);
	}

	function decode(key: string, raw: Buffer, version: number): unknown {
		let sealed: unknown;
		try {
			sealed = JSON.parse(raw.toString("utf8"));
		} catch {
			sealed = undefined;
		}
		if (!isSealed(sealed)) throw badValue(key, "is not a sealed certificatee record");
		const opened = open(encryptionKey, record(key), sealed);
		if (!opened) throw badValue(key, `cannot be decrypted with ${ENCRYPTION_KEY_FIELD}`);
		checkVersion(key, opened.seq, version);
		const plain = opened.plain;
		try {
			return JSON.parse(plain.toString("utf8"));
		} catch {
			throw badValue(key, "decrypts but does not hold JSON");
		}
	}

	function refusedByFence(
		key: string,
		fence: Fence | undefined,
		found: IKeyValue | undefined,
	): CertificateeError {
		fencedCount++;
		const why =
			fence === undefined
				? "this member holds no fence (it is not the leader or owner)"
				: found === undefined
					? `${conn.settings.prefix}${fence.key} is gone`
					: `${conn.settings.prefix}${fence.key} was created again at revision ${found.create_revision}, this member's is ${fence.createRevision}`;
		return new CertificateeError("CLUSTER_FENCED", `write of state "${key}" refused: ${why}`, {
			context: { operation: `put ${location(key)}`, endpoint: conn.settings.endpoints.join(",") },
			hint: "another member took over; nothing was written, and this member follows the new leader",
		});
	}

	const rangeOf = (op: IResponseOp | undefined) => op?.response_range?.kvs[0];

	async function put(key: string, value: unknown, expectedVersion: number, fence?: () => Fence | undefined) {
		stateKeySegments(key);
		const name = `${STATE}${key}`;
		const held = fence?.();
		if (fence && !held) throw refusedByFence(key, undefined, undefined);
		const body = JSON.stringify(
			seal(
				encryptionKey,
				record(key),
				expectedVersion + 1,
				Buffer.from(JSON.stringify(value) ?? "null", "utf8"),
			),
		);
		let txn = conn.kv.if(name, "Version", "==", expectedVersion);
		if (held) txn = txn.and(held.key, "Create", "==", held.createRevision);
		const result = await rpc(`put ${name}`, () =>
			txn
				.then(conn.kv.put(name).value(body))
				.else(conn.kv.get(name), ...(held ? [conn.kv.get(held.key)] : []))
				.commit(),
		);
		if (result.succeeded) {
			// The compare proved etcd's version: even after a deliberate delete, this is the record now.
			seen.set(key, expectedVersion + 1);
			return expectedVersion + 1;
		}
		if (held) {
			const found = rangeOf(result.responses[1]);
			if (found?.create_revision !== held.createRevision) throw refusedByFence(key, held, found);
		}
		const current = Number(rangeOf(result.responses[0])?.version ?? 0);
		throw new CertificateeError(
			"STATE_CONFLICT",
			`state "${key}" is at version ${current}, expected ${expectedVersion}`,
			{ context: { operation: `put ${location(key)}` }, hint: "read it again and retry", retryable: true },
		);
	}

	async function get(key: string): Promise<Versioned | undefined> {
		stateKeySegments(key);
		const name = `${STATE}${key}`;
		const found = (await rpc(`get ${name}`, () => conn.kv.get(name).exec())).kvs[0];
		if (!found) return undefined;
		const version = Number(found.version);
		return { value: decode(key, found.value, version), version };
	}

	async function list(prefix: string): Promise<string[]> {
		const keys = await rpc(`list ${STATE}${prefix}`, () =>
			conn.kv.getAll().prefix(`${STATE}${prefix}`).keys(),
		);
		return keys.map((k) => k.slice(STATE.length)).sort();
	}

	/**
	 * A watch that stays current: etcd3 reconnects a watcher on its own and resumes from the last revision it saw,
	 * but it may skip events if the stream breaks again during the replay, and a compacted revision cancels the
	 * watcher outright. So after any reconnect the prefix is listed and every key reported (the caller re-reads),
	 * and a cancelled watcher is replaced by a new one, listed the same way once it is connected.
	 */
	function watch(prefix: string, onChange: (key: string) => void): () => void {
		const range = `${STATE}${prefix}`;
		let stopped = false;
		let watcher: Watcher | undefined;
		let timer: NodeJS.Timeout | undefined;
		let delay = RETRY_MIN_MS;
		const active: ActiveWatch = {
			behindSince: now(),
			async stop() {
				stopped = true;
				watches.delete(active);
				if (timer) clearTimeout(timer);
				const w = watcher;
				watcher = undefined;
				if (w) await Promise.race([w.cancel().catch(() => undefined), sleep(conn.deadlineMs)]);
			},
		};
		watches.add(active);

		const later = (work: () => Promise<void>) => {
			if (stopped) return;
			timer = setTimeout(() => {
				timer = undefined;
				void work();
			}, delay);
			timer.unref();
			delay = Math.min(delay * 2, RETRY_MAX_MS);
		};
		const report = (kv: IKeyValue) => {
			if (!stopped) onChange(kv.key.toString("utf8").slice(STATE.length));
		};

		async function resync(w: Watcher): Promise<void> {
			if (stopped || watcher !== w) return;
			let keys: string[];
			try {
				keys = await list(prefix);
			} catch {
				later(() => resync(w));
				return;
			}
			if (stopped || watcher !== w) return;
			active.behindSince = undefined;
			delay = RETRY_MIN_MS;
			for (const key of keys) onChange(key);
		}

		async function establish(missedSome: boolean): Promise<void> {
			if (stopped) return;
			let w: Watcher;
			try {
				w = await conn.kv.watch().prefix(range).create();
			} catch {
				later(() => establish(true));
				return;
			}
			if (stopped) {
				await w.cancel().catch(() => undefined);
				return;
			}
			watcher = w;
			w.on("put", report);
			w.on("delete", report);
			w.on("disconnected", () => {
				active.behindSince ??= now();
			});
			w.on("connected", () => void resync(w));
			// Cancelled by etcd (its start revision was compacted away): etcd3 has dropped it already.
			w.on("error", () => {
				if (watcher !== w) return;
				watcher = undefined;
				active.behindSince ??= now();
				later(() => establish(true));
			});
			if (missedSome) await resync(w);
			else {
				active.behindSince = undefined;
				delay = RETRY_MIN_MS;
			}
		}

		void establish(false);
		return () => void active.stop();
	}

	const view = (fence?: () => Fence | undefined): StateStore => ({
		get,
		put: (key, value, expectedVersion) => put(key, value, expectedVersion, fence),
		list,
		watch,
		location,
	});

	return {
		...view(),
		fenced: (fence) => view(fence),
		fencedWrites: () => fencedCount,
		watchLagSeconds() {
			const t = now();
			let lag = 0;
			// A watch not yet (re)connected is behind, even within the millisecond it started.
			for (const w of watches)
				if (w.behindSince !== undefined) lag = Math.max(lag, (t - w.behindSince) / 1000, 0.001);
			return lag;
		},
		async close() {
			await Promise.all([...watches].map((w) => w.stop()));
		},
	};
}

function sleep(ms: number): Promise<void> {
	return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
