/**
 * Several `certificatee run` replicas on one real etcd, pushing to real HAProxy nodes over their admin sockets,
 * with the local CA as issuer (docs/cluster.md): each certificate is issued once, every node serves it, each
 * endpoint is pushed by exactly one member when sharding; the leader killed (-9) or frozen (SIGSTOP) is
 * replaced within its TTL and its late writes change nothing; an operator's renewal is served everywhere within
 * seconds; etcd down at start or during the run stops pushes and readiness, and the replicas recover.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadEncryptionKey } from "../../src/cluster/encryption.js";
import { connectEtcd } from "../../src/cluster/etcd.js";
import { createEtcdStore } from "../../src/cluster/etcd-store.js";
import { readCertificateRecord } from "../../src/store/records.js";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { type EtcdHandle, startEtcd } from "../harness/etcd.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { assertReloadSafe } from "../harness/invariant.js";
import { freeze } from "../harness/process.js";
import { type Replicas, type ReplicasOptions, startReplicas } from "../harness/replicas.js";

const TTL_S = 3;
/** Names of their own per test: the HAProxy nodes are shared, and still serve what the last test pushed. */
let tag = 0;
let CERTS: Array<{ name: string; domains: string[] }> = [];
let WEB = "";
let API = "";

let etcd: EtcdHandle;
let nodes: Haproxy[] = [];
let running: Replicas | undefined;

beforeAll(async () => {
	await ensureBuilt();
	const ca = await createTestCa("cluster placeholder CA");
	const placeholder = await issueTestLeaf(ca, { names: ["placeholder.test"] });
	etcd = await startEtcd();
	nodes = await Promise.all(
		[0, 1, 2].map(() => startHaproxy({ crtDir: { "placeholder.pem": placeholder.combinedPem } })),
	);
}, 60_000);

beforeEach(() => {
	tag++;
	WEB = `web-${tag}.test`;
	API = `api-${tag}.test`;
	// Certificate names too: a node refuses a new certificate under an old name that drops its names.
	CERTS = [
		{ name: `web-${tag}`, domains: [WEB] },
		{ name: `api-${tag}`, domains: [API] },
	];
});

afterEach(async () => {
	await running?.stop();
	running = undefined;
	// What the replicas left on disk is what a reload serves: the same as at runtime.
	for (const h of nodes) await assertReloadSafe(h);
}, 60_000);

afterAll(async () => {
	await Promise.all(nodes.map((h) => h.stop()));
	await etcd?.stop();
});

/** Replicas on this file's etcd and nodes with TTL_S and this test's certificates; stopped after the test. */
async function replicas(members: number, options: Partial<ReplicasOptions> = {}): Promise<Replicas> {
	running = await startReplicas({
		etcdEndpoints: etcd.endpoints,
		nodes,
		members,
		certificates: CERTS,
		leaseTtl: `${TTL_S}s`,
		...options,
	});
	return running;
}

/** The certificate records the replicas share, read from etcd as an operator's tool would. */
async function history(r: Replicas, name: string): Promise<string[]> {
	const conn = connectEtcd({ endpoints: etcd.endpoints, prefix: r.prefix });
	const store = createEtcdStore(conn, { encryptionKey: loadEncryptionKey(r.encryptionKeyFile, {}) });
	try {
		return (await readCertificateRecord(store, name))?.value.history.map((h) => h.serial) ?? [];
	} finally {
		await store.close();
		conn.close();
	}
}

/** Which replica ran each endpoint in its last cycle (from /status.json). */
async function pushers(r: Replicas): Promise<Map<string, string[]>> {
	const by = new Map<string, string[]>();
	for (let i = 0; i < r.count; i++) {
		const doc = (await r.json(i, "/status.json")) as
			| { targets: Array<{ endpoints: Array<{ target: string; endpoint: string }> }> }
			| undefined;
		for (const e of doc?.targets.flatMap((t) => t.endpoints) ?? [])
			by.set(e.endpoint, [...(by.get(e.endpoint) ?? []), r.replica(i).member]);
	}
	return by;
}

describe("cluster: replicas on one etcd", () => {
	it("three sharded replicas: each certificate issued once, served by every node, each endpoint pushed by one member", async () => {
		const r = await replicas(3, { shard: true });
		await r.leader();
		const web = await r.waitServed(WEB);
		const api = await r.waitServed(API);
		expect(new Set(web).size).toBe(1);
		expect(new Set(api).size).toBe(1);
		expect(await history(r, `web-${tag}`)).toEqual([web[0]]);
		expect(await history(r, `api-${tag}`)).toEqual([api[0]]);
		// Each member sees all three; each endpoint is in exactly one member's last cycle.
		for (let i = 0; i < r.count; i++)
			await expect
				.poll(async () => (await r.metrics(i))?.get("certificatee_cluster_members"), { timeout: 10_000 })
				.toBe(3);
		await expect
			.poll(
				async () => {
					const by = await pushers(r);
					return ["node-0", "node-1", "node-2"].map((e) => by.get(e)?.length ?? 0);
				},
				{ timeout: 10_000 },
			)
			.toEqual([1, 1, 1]);
		// `status` from any host shows the leader and who pushes what.
		const status = await certificatee(["status", "--json", "--config", r.configFile], { env: r.env });
		expect(status.code, status.stderr).toBe(0);
		const doc = JSON.parse(status.stdout) as {
			cluster: { leader?: string; members: string[]; owners: Array<{ endpoint: string; owner?: string }> };
		};
		expect(doc.cluster.members).toEqual(["member-0", "member-1", "member-2"]);
		expect(doc.cluster.leader).toBe(r.replica(await r.leader()).member);
		expect(doc.cluster.owners.map((o) => o.owner !== undefined)).toEqual([true, true, true]);
	}, 300_000);

	it("without sharding the leader alone pushes every endpoint: two members never write one HAProxy at once", async () => {
		const r = await replicas(2);
		const leader = await r.leader();
		await r.waitServed(WEB);
		await r.waitServed(API);
		// Each endpoint is in the leader's last cycle and in no other member's (two writers in HAProxy's one
		// transaction abort, or even cross, each other's writes).
		await expect
			.poll(
				async () => {
					const by = await pushers(r);
					return ["node-0", "node-1", "node-2"].map((e) => by.get(e) ?? []);
				},
				{ timeout: 10_000 },
			)
			.toEqual([0, 1, 2].map(() => [r.replica(leader).member]));
	}, 300_000);

	it("the leader killed with -9: another leads within TTL + 2 s, its endpoints move, orders continue", async () => {
		const r = await replicas(3, { shard: true });
		await r.waitServed(WEB);
		const old = await r.leader();
		const killedAt = Date.now();
		r.replica(old).daemon.signal("SIGKILL");
		await r.replica(old).daemon.exited;
		const next = await r.leader((TTL_S + 2) * 1000 + 2000);
		const takeover = Date.now() - killedAt;
		expect(next).not.toBe(old);
		expect(takeover).toBeLessThan((TTL_S + 2) * 1000 + 1000);
		// A certificate added now is ordered by the new leader and pushed to every node, the dead member's included.
		r.setCertificates([...CERTS, { name: `late-${tag}`, domains: [`late-${tag}.test`] }]);
		const late = await r.waitServed(`late-${tag}.test`);
		expect(await history(r, `late-${tag}`)).toEqual([late[0]]);
	}, 300_000);

	it("the leader frozen past its TTL (SIGSTOP) then resumed: another leads, and nothing it writes lands", async () => {
		const r = await replicas(2);
		await r.waitServed(WEB);
		await r.waitServed(API);
		const old = await r.leader();
		const before = { web: await history(r, `web-${tag}`), api: await history(r, `api-${tag}`) };
		await freeze(r.replica(old).daemon.child);
		const next = await r.leader((TTL_S + 2) * 1000 + 2000);
		expect(next).not.toBe(old);
		// An operator asks for a renewal while the old leader is frozen; the new one orders it.
		const renew = await certificatee(["renew", `web-${tag}`, "--force", "--config", r.configFile], {
			env: r.env,
		});
		expect(renew.code, renew.stderr).toBe(0);
		const renewed = await r.waitServed(WEB, (s) => s !== before.web[0]);
		r.replica(old).daemon.signal("SIGCONT");
		// Resumed, it finds its lease gone by its own clock: it does not lead, orders nothing, pushes nothing older.
		await expect.poll(async () => (await r.leaders()).length, { timeout: 10_000 }).toBe(1);
		expect(await r.leaders()).toEqual([next]);
		await new Promise((done) => setTimeout(done, 2 * TTL_S * 1000));
		expect(await history(r, `web-${tag}`)).toEqual([renewed[0], ...before.web]);
		expect(await history(r, `api-${tag}`)).toEqual(before.api);
		expect(await r.served(WEB)).toEqual(renewed);
	}, 300_000);

	it("a renewal recorded on one host is served by every node within 5 s of its issue", async () => {
		const r = await replicas(3, { shard: true });
		const first = await r.waitServed(API);
		const leader = await r.leader();
		const from = r.replica(leader).daemon.logs.length;
		const renew = await certificatee(["renew", `api-${tag}`, "--force", "--config", r.configFile], {
			env: r.env,
		});
		expect(renew.code, renew.stderr).toBe(0);
		await r.replica(leader).daemon.waitForLog(/certificate issued/, { from, timeoutMs: 15_000 });
		const issuedAt = Date.now();
		const served = await r.waitServed(API, (s) => s !== first[0], 5_000);
		expect(Date.now() - issuedAt).toBeLessThan(5_000);
		expect((await history(r, `api-${tag}`)).length).toBe(2);
		// The command waited for it, as with a daemon alone: the new serial, once every node served it.
		expect(renew.stdout).toContain(`api-${tag}: serial ${served[0]} served at`);
		expect(renew.stdout.match(/: served$/gm)).toHaveLength(nodes.length);
	}, 300_000);
});

describe("cluster: etcd trouble", () => {
	it("one etcd member of three killed: no leadership change, a renewal still goes through", async () => {
		const three = await startEtcd({ members: 3 });
		try {
			const r = await replicas(2, { etcdEndpoints: three.endpoints });
			const first = await r.waitServed(WEB);
			const leader = await r.leader();
			await three.kill(0);
			await new Promise((done) => setTimeout(done, 2 * TTL_S * 1000));
			expect(await r.leaders()).toEqual([leader]);
			const renew = await certificatee(["renew", `web-${tag}`, "--force", "--config", r.configFile], {
				env: r.env,
			});
			expect(renew.code, renew.stderr).toBe(0);
			await r.waitServed(WEB, (s) => s !== first[0]);
			expect(await r.leaders()).toEqual([leader]);
			await r.stop();
			running = undefined;
		} finally {
			await three.stop();
		}
	}, 300_000);

	it("etcd down at start and during the run: not ready, nothing pushed, no crash; recovers when etcd is back", async () => {
		const lone = await startEtcd();
		try {
			await lone.kill(0);
			const r = await replicas(1, {
				etcdEndpoints: lone.endpoints,
				nodes: [nodes[0]!],
				certificates: [{ name: "down", domains: ["down.test"] }],
			});
			const daemon = r.replica(0).daemon;
			await daemon.waitForLog(/cycle failed/, { timeoutMs: 30_000 });
			const ready = (await r.json(0, "/readyz")) as { ready: boolean; reason: string };
			expect(ready.ready).toBe(false);
			expect(ready.reason).toMatch(/CLUSTER_UNAVAILABLE/);
			expect(r.alive(0)).toBe(true);
			expect(await r.served("down.test")).toEqual([undefined]);
			await lone.restart(0);
			await r.waitServed("down.test", undefined, 60_000);
			await expect
				.poll(async () => ((await r.json(0, "/readyz")) as { ready: boolean }).ready, { timeout: 30_000 })
				.toBe(true);
			// Down again mid-run: readiness drops, the process stays up.
			await lone.kill(0);
			await expect
				.poll(async () => ((await r.json(0, "/readyz")) as { ready: boolean }).ready, { timeout: 30_000 })
				.toBe(false);
			expect(r.alive(0)).toBe(true);
			await lone.restart(0);
			await expect
				.poll(async () => ((await r.json(0, "/readyz")) as { ready: boolean }).ready, { timeout: 60_000 })
				.toBe(true);
		} finally {
			await running?.stop();
			running = undefined;
			await lone.stop();
		}
	}, 300_000);
});
