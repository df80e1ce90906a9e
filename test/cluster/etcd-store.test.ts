import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { connectEtcd, type EtcdConnection } from "../../src/cluster/etcd.js";
import { createEtcdStore, type EtcdStore } from "../../src/cluster/etcd-store.js";
import type { Fence } from "../../src/cluster/fence.js";
import { openFileStore } from "../../src/store/file-store.js";
import type { StateStore } from "../../src/store/types.js";
import { type EtcdHandle, sealFormat1, startEtcd } from "../harness/etcd.js";
import { failure } from "../harness/failure.js";
import { expectNoKeyMaterial } from "../harness/no-secrets.js";
import { startTcpProxy, type TcpProxy } from "../harness/tcp-proxy.js";

let etcd: EtcdHandle;
const key = randomBytes(32);
const opened: Array<{ conn: EtcdConnection; store?: EtcdStore }> = [];
const proxies: TcpProxy[] = [];
let n = 0;

/** A store under its own prefix, so tests do not see each other's keys. */
function open(
	options: { endpoints?: string[]; prefix?: string; encryptionKey?: Buffer; deadlineMs?: number } = {},
) {
	const conn = connectEtcd({
		endpoints: options.endpoints ?? etcd.endpoints,
		prefix: options.prefix ?? `t${++n}/`,
		deadline_ms: options.deadlineMs ?? 2000,
	});
	const store = createEtcdStore(conn, { encryptionKey: options.encryptionKey ?? key });
	opened.push({ conn, store });
	return { conn, store };
}

/** The raw bytes etcd holds at an absolute key. */
async function raw(conn: EtcdConnection, absolute: string): Promise<string | null> {
	return conn.client.get(absolute).string();
}

beforeAll(async () => {
	etcd = await startEtcd();
});
afterEach(async () => {
	for (const { conn, store } of opened.splice(0)) {
		await store?.close();
		conn.close();
	}
	for (const p of proxies.splice(0)) await p.stop();
});
afterAll(async () => {
	await etcd?.stop();
});

const pem = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({
	type: "pkcs8",
	format: "pem",
}) as string;

describe("cluster/etcd-store", () => {
	it("versions are etcd's per-key versions and put is compare-and-swap on them", async () => {
		const { store } = open();
		expect(await store.get("certificates/a")).toBeUndefined();
		expect(await store.put("certificates/a", { n: 1 }, 0)).toBe(1);
		expect(await store.put("certificates/a", { n: 2 }, 1)).toBe(2);
		const stale = await failure(store.put("certificates/a", { n: 3 }, 1));
		expect(stale).toMatchObject({ code: "STATE_CONFLICT", retryable: true });
		expect(stale.message).toContain("is at version 2, expected 1");
		await expect(store.put("certificates/a", { n: 3 }, 0)).rejects.toMatchObject({ code: "STATE_CONFLICT" });
		await expect(store.put("certificates/new", { n: 1 }, 4)).rejects.toMatchObject({
			code: "STATE_CONFLICT",
		});
		expect(await store.get("certificates/a")).toEqual({ version: 2, value: { n: 2 } });
		expect(await store.get("certificates/new")).toBeUndefined();
	});

	it("two writers racing from the same version: exactly one wins", async () => {
		const a = open({ prefix: "race/" });
		const b = open({ prefix: "race/" });
		await a.store.put("renewal/x", { by: "start" }, 0);
		const results = await Promise.allSettled([
			...Array.from({ length: 10 }, (_, i) => a.store.put("renewal/x", { by: `a${i}` }, 1)),
			...Array.from({ length: 10 }, (_, i) => b.store.put("renewal/x", { by: `b${i}` }, 1)),
		]);
		expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
		expect(
			results.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason.code),
		).toEqual(Array(19).fill("STATE_CONFLICT"));
		expect((await b.store.get("renewal/x"))?.version).toBe(2);
	});

	it("lists keys under a prefix, sorted, without the cluster prefix", async () => {
		const { store } = open();
		for (const k of ["certificates/b", "renewal/a", "certificates/a", "certificates/a-2", "accounts/le"])
			await store.put(k, {}, 0);
		expect(await store.list("certificates/")).toEqual([
			"certificates/a",
			"certificates/a-2",
			"certificates/b",
		]);
		expect(await store.list("certificates/a")).toEqual(["certificates/a", "certificates/a-2"]);
		expect(await store.list("")).toEqual([
			"accounts/le",
			"certificates/a",
			"certificates/a-2",
			"certificates/b",
			"renewal/a",
		]);
		expect(await store.list("none/")).toEqual([]);
		expect(store.location?.("certificates/a")).toMatch(/^etcd:t\d+\/state\/certificates\/a$/);
	});

	it("etcd holds every value sealed: no PEM, no key name, a fresh nonce per write", async () => {
		const { conn, store } = open({ prefix: "sealed/" });
		await store.put("certificates/example-com", { keyPem: pem, names: ["example.com"] }, 0);
		const first = await raw(conn, "sealed/state/certificates/example-com");
		expect(first).not.toBeNull();
		expectNoKeyMaterial((first ?? "").replace(/"data":"[^"]*"/, ""), [pem]);
		expect(first).not.toContain("BEGIN");
		expect(first).not.toContain("example.com");
		const record = JSON.parse(first ?? "{}");
		expect(Object.keys(record).sort()).toEqual(["alg", "data", "nonce", "seq", "v"]);
		expect(record).toMatchObject({ v: 2, alg: "A256GCM", seq: 1 });
		await store.put("certificates/example-com", { keyPem: pem, names: ["example.com"] }, 1);
		const second = JSON.parse((await raw(conn, "sealed/state/certificates/example-com")) ?? "{}");
		expect(second.nonce).not.toBe(record.nonce);
		expect(second.data).not.toBe(record.data);
		expect((await store.get("certificates/example-com"))?.value).toEqual({
			keyPem: pem,
			names: ["example.com"],
		});
	});

	it("a value sealed with another key, moved to another key, or not sealed at all is CLUSTER_BAD_VALUE", async () => {
		const { conn, store } = open({ prefix: "bad/" });
		await store.put("accounts/le", { keyPem: pem }, 0);
		const other = open({ prefix: "bad/", encryptionKey: randomBytes(32) });
		const wrongKey = await failure(other.store.get("accounts/le"));
		expect(wrongKey.code).toBe("CLUSTER_BAD_VALUE");
		expect(wrongKey.message).toContain('state "accounts/le" at etcd:bad/state/accounts/le');
		expect(wrongKey.message).toContain("cluster.encryption_key_file");
		expect(wrongKey.context.field).toBe("cluster.encryption_key_file");
		expect(wrongKey.hint).toContain("same cluster.encryption_key_file");
		expectNoKeyMaterial(JSON.stringify({ ...wrongKey.toJSON(), stack: wrongKey.stack }), [pem]);

		// The record's own key is its associated data: a record copied onto another key does not open.
		await conn.client.put("bad/state/accounts/other").value((await raw(conn, "bad/state/accounts/le")) ?? "");
		expect((await failure(store.get("accounts/other"))).code).toBe("CLUSTER_BAD_VALUE");

		await conn.client.put("bad/state/accounts/plain").value(JSON.stringify({ keyPem: pem }));
		const plain = await failure(store.get("accounts/plain"));
		expect(plain.code).toBe("CLUSTER_BAD_VALUE");
		expect(plain.message).toContain("not a sealed certificatee record");
		expectNoKeyMaterial(plain.message, [pem]);
		expect((await store.get("accounts/le"))?.value).toEqual({ keyPem: pem });
	});

	it("an older sealed value written again under its key (a rollback) is refused, also after a delete; a value copied to another cluster's prefix does not open", async () => {
		const { conn, store } = open({ prefix: "rollback/" });
		const name = "rollback/state/accounts/le";
		await store.put("accounts/le", { keyPem: "old account key" }, 0);
		const older = (await raw(conn, name)) ?? "";
		await store.put("accounts/le", { keyPem: "rolled-over account key" }, 1);
		expect((await store.get("accounts/le"))?.value).toEqual({ keyPem: "rolled-over account key" });

		// Someone who can write etcd puts the older sealed value back: etcd's version is 3, the value says 1.
		await conn.client.put(name).value(older);
		const replayed = await failure(store.get("accounts/le"));
		expect(replayed.code).toBe("CLUSTER_BAD_VALUE");
		expect(replayed.message).toBe(
			'state "accounts/le" at etcd:rollback/state/accounts/le holds a value sealed as version 1, but etcd\'s version of the key is 3: refused (a rollback or a replay of an older value by someone who can write etcd)',
		);
		expect(replayed.hint).toMatch(/find who writes to etcd besides the members/);
		// Another member (no memory of this key) refuses it too: the version is in the sealed value.
		const fresh = open({ prefix: "rollback/" });
		expect((await failure(fresh.store.get("accounts/le"))).message).toMatch(
			/sealed as version 1, but etcd's version of the key is 3/,
		);

		// Deleted and written again, the versions agree (1 and 1): a member that saw version 2 refuses it.
		await conn.client.delete().key(name);
		await conn.client.put(name).value(older);
		expect((await failure(store.get("accounts/le"))).message).toMatch(
			/went back to version 1 after version 2 was seen \(deleted and written again\)/,
		);

		// The prefix is bound: the same key in another cluster's prefix does not open.
		const other = open({ prefix: "rollback-other/" });
		await other.store.put("accounts/le", { keyPem: "x" }, 0);
		await conn.client.put("rollback-other/state/accounts/le").value((await raw(conn, name)) ?? "");
		expect((await failure(other.store.get("accounts/le"))).message).toMatch(/cannot be decrypted/);

		// A member's own write after a deliberate delete is the record from then on.
		await conn.client.delete().key(name);
		expect(await store.put("accounts/le", { keyPem: "rebuilt" }, 0)).toBe(1);
		expect((await store.get("accounts/le"))?.value).toEqual({ keyPem: "rebuilt" });
	});

	it("migration: a value sealed in format 1 (before the version was bound) is read, rewritten in format 2, and not accepted again once replaced", async () => {
		const { conn, store } = open({ prefix: "migrate/" });
		const name = "migrate/state/certificates/shop";
		const legacy = JSON.stringify(sealFormat1(key, "certificates/shop", Buffer.from('{"serial":"01"}')));
		await conn.client.put(name).value(legacy);
		expect(await store.get("certificates/shop")).toEqual({ value: { serial: "01" }, version: 1 });
		expect(await store.put("certificates/shop", { serial: "02" }, 1)).toBe(2);
		expect(JSON.parse((await raw(conn, name)) ?? "{}")).toMatchObject({ v: 2, seq: 2 });
		await conn.client.put(name).value(legacy);
		expect((await failure(store.get("certificates/shop"))).message).toMatch(
			/holds a value in the old format \(unversioned\) after version 2 was seen: refused/,
		);
	});

	it("a fenced write lands only while the fence key keeps its create_revision; stale ones change nothing and are counted", async () => {
		const { conn, store } = open({ prefix: "fence/" });
		const created = async () => {
			await conn.kv.put("leader").value("m1");
			return (await conn.kv.get("leader").exec()).kvs[0]?.create_revision ?? "";
		};
		let fence: Fence | undefined = { key: "leader", createRevision: await created() };
		const asLeader = store.fenced(() => fence);
		expect(await asLeader.put("certificates/a", { by: "m1" }, 0)).toBe(1);
		expect(await asLeader.put("certificates/a", { by: "m1", again: true }, 1)).toBe(2);

		// Another member is elected: the key is deleted and created again, with a new create_revision.
		await conn.kv.delete().key("leader");
		const theirs = await created();
		expect(theirs).not.toBe(fence.createRevision);
		const attempts = 50;
		for (let i = 0; i < attempts; i++) {
			const e = await failure(asLeader.put("certificates/a", { by: "m1", stale: i }, 2));
			expect(e).toMatchObject({ code: "CLUSTER_FENCED", retryable: false });
			expect(e.message).toContain(`created again at revision ${theirs}`);
		}
		expect(await store.get("certificates/a")).toEqual({ version: 2, value: { by: "m1", again: true } });
		expect(store.fencedWrites()).toBe(attempts);

		// Holding nothing: refused before any RPC, counted; the key gone: refused too.
		fence = undefined;
		expect((await failure(asLeader.put("certificates/b", {}, 0))).code).toBe("CLUSTER_FENCED");
		await conn.kv.delete().key("leader");
		fence = { key: "leader", createRevision: theirs };
		expect((await failure(asLeader.put("certificates/b", {}, 0))).message).toContain("fence/leader is gone");
		expect(await store.get("certificates/b")).toBeUndefined();
		expect(store.fencedWrites()).toBe(attempts + 2);

		// The current fence with a stale version is a conflict, not a fencing.
		fence = { key: "leader", createRevision: await created() };
		expect((await failure(asLeader.put("certificates/a", {}, 1))).code).toBe("STATE_CONFLICT");
		expect(await asLeader.put("certificates/a", { by: "m2" }, 2)).toBe(3);
		expect(store.fencedWrites()).toBe(attempts + 2);
	});

	it("watches changes under a prefix until stopped", async () => {
		const a = open({ prefix: "watch/" });
		const b = open({ prefix: "watch/" });
		const seen: string[] = [];
		const stop = a.store.watch("certificates/", (k) => seen.push(k));
		await vi.waitFor(() => expect(a.store.watchLagSeconds()).toBe(0), { timeout: 10_000 });
		await b.store.put("certificates/x", { n: 1 }, 0);
		await b.store.put("renewal/x", { n: 1 }, 0);
		await b.store.put("certificates/x", { n: 2 }, 1);
		await vi.waitFor(() => expect(seen).toEqual(["certificates/x", "certificates/x"]), { timeout: 10_000 });
		stop();
		await b.store.put("certificates/y", {}, 0);
		await b.store.get("certificates/y");
		expect(seen).toEqual(["certificates/x", "certificates/x"]);
	});

	/**
	 * A store watching etcd through a relay the test cuts, a second store writing directly while it is cut off;
	 * once the link is back, the watch reports every key (a full re-read, so even one changed before the cut)
	 * and goes on with new changes.
	 */
	it.each<[string, (direct: EtcdStore, conn: EtcdConnection, prefix: string) => Promise<void>]>([
		[
			"after a reconnect, re-reads its prefix and reports every key (changes made while cut off included)",
			async (direct) => {
				await direct.put("certificates/during", {}, 0);
			},
		],
		[
			"when the revision it would resume from is compacted away, starts over with a full re-sync",
			async (direct, conn, prefix) => {
				await direct.put("certificates/during", {}, 0);
				await direct.put("certificates/during", { n: 2 }, 1);
				const revision = (await conn.client.get(prefix).exec()).header.revision;
				await conn.client.kv.compact({ revision, physical: true });
			},
		],
	])(
		"%s",
		async (_what, whileCut) => {
			const prefix = `cut${++n}/`;
			const proxy = await startTcpProxy(etcd.endpoints[0] ?? "");
			proxies.push(proxy);
			const watching = open({ endpoints: [proxy.endpoint], prefix });
			const direct = open({ prefix });
			const seen = new Set<string>();
			watching.store.watch("certificates/", (k) => seen.add(k));
			await vi.waitFor(() => expect(watching.store.watchLagSeconds()).toBe(0), { timeout: 10_000 });
			await direct.store.put("certificates/before", {}, 0);
			await vi.waitFor(() => expect(seen).toContain("certificates/before"), { timeout: 10_000 });
			seen.clear();
			proxy.cut();
			await vi.waitFor(() => expect(watching.store.watchLagSeconds()).toBeGreaterThan(0), {
				timeout: 10_000,
			});

			await whileCut(direct.store, direct.conn, prefix);
			proxy.restore();
			await vi.waitFor(() => expect(seen).toEqual(new Set(["certificates/before", "certificates/during"])), {
				timeout: 15_000,
			});
			await vi.waitFor(() => expect(watching.store.watchLagSeconds()).toBe(0), { timeout: 10_000 });
			await direct.store.put("certificates/after", {}, 0);
			await vi.waitFor(() => expect(seen).toContain("certificates/after"), { timeout: 10_000 });
		},
		30_000,
	);

	it("an unreachable or frozen etcd is CLUSTER_UNAVAILABLE after the deadline, never a hang", async () => {
		const own = await startEtcd();
		try {
			const { store } = open({ endpoints: own.endpoints, deadlineMs: 500 });
			await store.put("certificates/a", { n: 1 }, 0);
			await own.pause(0);
			const frozen = [
				await failure(store.get("certificates/a")),
				await failure(store.put("certificates/a", { n: 2 }, 1)),
				await failure(store.list("")),
			];
			own.resume(0);
			for (const e of frozen) {
				expect(e).toMatchObject({ code: "CLUSTER_UNAVAILABLE", retryable: true });
				expect(e.message).toContain(own.endpoints[0]);
				expect(e.hint).toContain("cluster.etcd");
			}
			// Back once etcd answers (the client's circuit breaker may hold calls back a few seconds more).
			await vi.waitFor(async () => expect(await store.get("certificates/a")).toMatchObject({ version: 1 }), {
				timeout: 15_000,
				interval: 500,
			});
			await own.kill(0);
			const down = await failure(store.get("certificates/a"));
			expect(down).toMatchObject({
				code: "CLUSTER_UNAVAILABLE",
				context: { operation: expect.stringMatching(/^get /) },
			});
		} finally {
			await own.stop();
		}
	}, 60_000);

	it("with one etcd member of three killed, nothing is lost and writes go on", async () => {
		const three = await startEtcd({ members: 3 });
		try {
			const { store } = open({ endpoints: three.endpoints });
			for (let i = 0; i < 5; i++) await store.put(`certificates/c${i}`, { i }, 0);
			await three.kill(0);
			for (let i = 0; i < 5; i++)
				expect(await store.put(`certificates/c${i}`, { i, again: true }, 1)).toBe(2);
			await store.put("certificates/new", {}, 0);
			expect(await store.list("certificates/")).toHaveLength(6);
			expect(await store.get("certificates/c4")).toEqual({ version: 2, value: { i: 4, again: true } });
		} finally {
			await three.stop();
		}
	}, 60_000);
});

interface Backend {
	store: StateStore;
	/** Resolves once a watch just started sees changes. */
	watching(): Promise<void>;
	close(): Promise<void>;
}

/** The StateStore contract, the same table against the file store and the etcd store. */
describe.each([
	[
		"file",
		async (): Promise<Backend> => {
			const dir = await mkdtemp(join(tmpdir(), "certificatee-contract-"));
			const store = await openFileStore(dir);
			return {
				store,
				watching: async () => undefined,
				async close() {
					store.close();
					await rm(dir, { recursive: true, force: true });
				},
			};
		},
	],
	[
		"etcd",
		async (): Promise<Backend> => {
			const { store } = open();
			return {
				store,
				// Its watch starts when etcd has created it.
				watching: () => vi.waitFor(() => expect(store.watchLagSeconds()).toBe(0), { timeout: 10_000 }),
				close: async () => undefined,
			};
		},
	],
])("StateStore contract: %s", (_backend, make) => {
	it.each<[string, Array<[string, unknown, number, number | string]>]>([
		[
			"create at 0, then each put from the version it read",
			[
				["renewal/a", 1, 0, 1],
				["renewal/a", 2, 1, 2],
				["renewal/a", 3, 2, 3],
			],
		],
		[
			"create twice",
			[
				["renewal/a", 1, 0, 1],
				["renewal/a", 2, 0, "STATE_CONFLICT"],
			],
		],
		["put from a version it never had", [["renewal/a", 1, 2, "STATE_CONFLICT"]]],
		[
			"a stale version after an update",
			[
				["renewal/a", 1, 0, 1],
				["renewal/a", 2, 1, 2],
				["renewal/a", 3, 1, "STATE_CONFLICT"],
			],
		],
		[
			"values of every JSON kind",
			[
				["a/s", "text", 0, 1],
				["a/n", 42, 0, 1],
				["a/l", [1, { x: null }], 0, 1],
				["a/b", false, 0, 1],
			],
		],
		["an invalid key", [["../x", 1, 0, "INTERNAL"]]],
	])("%s", async (_what, steps) => {
		const { store, close } = await make();
		try {
			const expected = new Map<string, { value: unknown; version: number }>();
			for (const [k, value, from, outcome] of steps) {
				if (typeof outcome === "number") {
					expect(await store.put(k, value, from)).toBe(outcome);
					expected.set(k, { value, version: outcome });
				} else expect((await failure(store.put(k, value, from))).code).toBe(outcome);
			}
			for (const [k, v] of expected) expect(await store.get(k)).toEqual(v);
			expect(await store.list("")).toEqual([...expected.keys()].sort());
		} finally {
			await close();
		}
	});

	it("reports a change through watch, and a missing key as undefined", async () => {
		const { store, watching, close } = await make();
		try {
			const seen: string[] = [];
			const stop = store.watch("certificates/", (k) => seen.push(k));
			await watching();
			await store.put("certificates/a", {}, 0);
			await vi.waitFor(() => expect(seen).toEqual(["certificates/a"]), { timeout: 10_000 });
			stop();
			expect(await store.get("certificates/none")).toBeUndefined();
		} finally {
			await close();
		}
	});
});
