/**
 * Scenario "cluster": several `certificatee run` replicas on one real etcd (Debian etcd-server), pushing to real
 * HAProxy nodes over their admin sockets, the local CA as issuer, `shard_endpoints: true` (docs/cluster.md).
 *
 *   takeover        the leader SIGKILLed (and, separately, SIGSTOPped past its TTL): time until another replica
 *                   says it leads (its certificatee_cluster_leader gauge), against the lease TTL, the bound a
 *                   user configures;
 *   fenced writes   a deposed leader (its lease gone, as etcd expires a frozen member's) keeps writing with its
 *                   old fence: how many of its writes land, fenced through the store versus plain puts;
 *   issue to served `certificatee renew NAME --force` on one host until every node serves the new serial, against
 *                   one certificatee process (no cluster) doing the same renewal and push over the same nodes.
 */
import { randomBytes } from "node:crypto";
import { connectEtcd } from "../../src/cluster/etcd.js";
import { createEtcdStore } from "../../src/cluster/etcd-store.js";
import { startLeadership } from "../../src/cluster/leadership.js";
import { startSession } from "../../src/cluster/session.js";
import { createTestCa, issueTestLeaf } from "../../test/harness/certs.js";
import { certificatee, ensureBuilt } from "../../test/harness/cli.js";
import { startEtcd } from "../../test/harness/etcd.js";
import { type Haproxy, startHaproxy } from "../../test/harness/haproxy.js";
import { startReplicas } from "../../test/harness/replicas.js";
import { type Row, ratio, type ScenarioResult } from "../lib/report.js";

export interface ClusterOptions {
	/** Replicas (default 3). */
	members: number;
	/** HAProxy nodes (default 3). */
	nodes: number;
	/** Takeover runs per failure kind (default 3). */
	runs: number;
	/** Lease TTL, seconds (default 5). */
	ttl: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => {
	const s = [...xs].sort((a, b) => a - b);
	return s.length === 0 ? Number.NaN : (s[(s.length - 1) >> 1]! + s[s.length >> 1]!) / 2;
};

export async function cluster(options: ClusterOptions): Promise<ScenarioResult> {
	const started = performance.now();
	await ensureBuilt();
	const ca = await createTestCa("bench cluster placeholder CA");
	const placeholder = await issueTestLeaf(ca, { names: ["placeholder.test"] });
	const etcd = await startEtcd();
	const nodes: Haproxy[] = await Promise.all(
		Array.from({ length: options.nodes }, () =>
			startHaproxy({ crtDir: { "placeholder.pem": placeholder.combinedPem } }),
		),
	);
	const notes: string[] = [];
	const rows: Row[] = [];
	try {
		const takeover = await takeovers(etcd.endpoints, nodes, options, notes);
		for (const [kind, times] of Object.entries(takeover)) {
			rows.push({
				metric: `takeover after ${kind} of the leader (s, median of ${times.length})`,
				certificatee: median(times),
				baseline: options.ttl,
				baselineName: "lease_ttl",
				variant: `${options.members} replicas`,
				ratio: ratio(options.ttl, median(times)),
				note: `runs: ${times.map((t) => t.toFixed(2)).join(", ")} s`,
			});
		}
		const fenced = await fencedWrites(etcd.endpoints, options.ttl);
		rows.push({
			metric: "writes of a deposed leader that landed (of 100)",
			certificatee: fenced.fencedLanded,
			baseline: fenced.plainLanded,
			baselineName: "the same writes unfenced (plain put)",
			variant: "fenced on the leader key's create revision",
			note: `${fenced.fencedRefused} refused with CLUSTER_FENCED and counted (${fenced.counted}); the new leader's value kept: ${fenced.keptNewValue}`,
		});
		const served = await issueToServed(etcd.endpoints, nodes, options);
		rows.push({
			metric: "renew --force until every node serves the new serial (s)",
			certificatee: served.cluster,
			baseline: served.single,
			baselineName: "one certificatee process (no cluster), renew --force",
			variant: `${options.members} sharded replicas`,
			ratio: ratio(served.single, served.cluster),
			note: `issue (leader's log) to served on all ${options.nodes} nodes: ${served.issueToServed.toFixed(2)} s`,
		});
	} finally {
		await Promise.all(nodes.map((h) => h.stop()));
		await etcd.stop();
	}
	return {
		scenario: "cluster",
		title: "Several replicas on etcd: takeover, fencing, issue to served",
		parameters: { ...options },
		rows,
		notes,
		durationS: (performance.now() - started) / 1000,
	};
}

async function takeovers(endpoints: string[], nodes: Haproxy[], options: ClusterOptions, notes: string[]) {
	const out: Record<string, number[]> = { SIGKILL: [], "SIGSTOP (frozen past its TTL)": [] };
	for (const kind of Object.keys(out)) {
		for (let run = 0; run < options.runs; run++) {
			const tag = randomBytes(3).toString("hex");
			const r = await startReplicas({
				etcdEndpoints: endpoints,
				nodes,
				members: options.members,
				// A name of its own per run: the nodes still hold the last run's certificates.
				certificates: [{ name: `web-${tag}`, domains: [`web-${tag}.test`] }],
				shard: true,
				leaseTtl: `${options.ttl}s`,
			});
			try {
				await r.waitServed(`web-${tag}.test`, undefined, 60_000);
				const old = await r.leader();
				// Right after a keepalive is the worst case; a random moment is what an operator sees.
				await sleep(Math.random() * 1000);
				const t0 = performance.now();
				r.replica(old).daemon.signal(kind === "SIGKILL" ? "SIGKILL" : "SIGSTOP");
				// Only the others are asked: a frozen replica's /metrics would hold each round up to its 2 s timeout.
				const others = Array.from({ length: r.count }, (_, i) => i).filter((i) => i !== old);
				for (;;) {
					const says = await Promise.all(
						others.map(async (i) => (await r.metrics(i))?.get("certificatee_cluster_leader") === 1),
					);
					if (says.filter(Boolean).length === 1) break;
					if (performance.now() - t0 > 60_000) throw new Error("no new leader within 60 s");
					await sleep(20);
				}
				out[kind]!.push((performance.now() - t0) / 1000);
			} finally {
				await r.stop();
			}
		}
	}
	notes.push(
		"Takeover: time from the signal to another replica's certificatee_cluster_leader gauge reading 1 (polled every 20 ms over HTTP).",
	);
	return out;
}

async function fencedWrites(endpoints: string[], ttl: number) {
	const prefix = `bench-${randomBytes(4).toString("hex")}/`;
	const encryptionKey = randomBytes(32);
	const member = (name: string) => {
		const conn = connectEtcd({ endpoints, prefix });
		const session = startSession(conn, { ttlSeconds: ttl });
		const leadership = startLeadership(conn, session, { member: name });
		const store = createEtcdStore(conn, { encryptionKey });
		return { conn, session, leadership, store };
	};
	const a = member("a");
	const until = async (what: string, ok: () => boolean) => {
		const end = Date.now() + 30_000;
		while (!ok()) {
			if (Date.now() > end) throw new Error(`not within 30 s: ${what}`);
			await sleep(10);
		}
	};
	await until("a leads", () => a.leadership.isLeader());
	const oldFence = a.leadership.fence()!;
	const b = member("b");
	// Deposed: its leader key and lease gone (what etcd does to a frozen member's after the TTL, without the
	// wait); its connection stays, as a paused process's queued requests do.
	await a.leadership.close();
	await a.session.close();
	await until("b leads", () => b.leadership.isLeader());
	await b.store.fenced(() => b.leadership.fence()).put("certificates/web", { by: "b" }, 0);
	let fencedRefused = 0;
	let plainLanded = 0;
	const stale = a.store.fenced(() => oldFence);
	for (let i = 0; i < 100; i++) {
		try {
			const current = (await a.store.get("certificates/web"))?.version ?? 0;
			await stale.put("certificates/web", { by: "a", i }, current);
		} catch (e) {
			if ((e as { code?: string }).code === "CLUSTER_FENCED") fencedRefused++;
		}
	}
	const afterFenced = (await b.store.get("certificates/web"))?.value as { by: string };
	const counted = a.store.fencedWrites();
	for (let i = 0; i < 100; i++) {
		const current = (await a.store.get("certificates/plain"))?.version ?? 0;
		await a.store.put("certificates/plain", { by: "a", i }, current);
		plainLanded++;
	}
	for (const m of [b, a]) {
		await m.leadership.close().catch(() => undefined);
		await m.session.close().catch(() => undefined);
		await m.store.close();
		m.conn.close();
	}
	return {
		fencedLanded: 100 - fencedRefused,
		fencedRefused,
		counted,
		plainLanded,
		keptNewValue: afterFenced.by === "b",
	};
}

async function issueToServed(endpoints: string[], nodes: Haproxy[], options: ClusterOptions) {
	const tag = randomBytes(3).toString("hex");
	const sni = `api-${tag}.test`;
	const r = await startReplicas({
		etcdEndpoints: endpoints,
		nodes,
		members: options.members,
		certificates: [{ name: `api-${tag}`, domains: [sni] }],
		shard: true,
		leaseTtl: `${options.ttl}s`,
	});
	let clusterS: number;
	let issueToServedS: number;
	try {
		const first = await r.waitServed(sni, undefined, 60_000);
		const leader = await r.leader();
		const from = r.replica(leader).daemon.logs.length;
		const t0 = performance.now();
		const renew = await certificatee(["renew", `api-${tag}`, "--force", "--config", r.configFile], {
			env: r.env,
		});
		if (renew.code !== 0) throw new Error(`renew failed: ${renew.stderr}`);
		const issued = r.replica(leader).daemon.waitForLog(/certificate issued/, { from, timeoutMs: 30_000 });
		await issued;
		const t1 = performance.now();
		await r.waitServed(sni, (s) => s !== first[0], 60_000);
		const t2 = performance.now();
		clusterS = (t2 - t0) / 1000;
		issueToServedS = (t2 - t1) / 1000;
	} finally {
		await r.stop();
	}
	// One process, same nodes: renew --force orders and runs one sync cycle over every node.
	const single = await singleProcess(nodes, `one-${tag}.test`);
	return { cluster: clusterS, issueToServed: issueToServedS, single };
}

async function singleProcess(nodes: Haproxy[], sni: string): Promise<number> {
	const { mkdtempSync, writeFileSync, rmSync } = await import("node:fs");
	const { tmpdir } = await import("node:os");
	const { join } = await import("node:path");
	const { stringify } = await import("yaml");
	const dir = mkdtempSync(join(tmpdir(), "certificatee-bench-single-"));
	const config = join(dir, "certificatee.yaml");
	writeFileSync(
		config,
		stringify({
			state_dir: join(dir, "state"),
			sources: [{ name: "local", type: "local-ca" }],
			certificates: [{ name: "one", domains: [sni], issuer: "local", lifetime: "1d" }],
			targets: nodes.map((h, i) => ({
				name: `node-${i}`,
				type: "haproxy-runtime",
				socket: h.adminSocket,
				crt_dir: h.crtDir,
				probe: h.address,
			})),
		}),
	);
	try {
		const first = await certificatee(["sync", "--once", "--config", config], { timeoutMs: 60_000 });
		if (first.code !== 0) throw new Error(`sync failed: ${first.stderr}`);
		const t0 = performance.now();
		const renew = await certificatee(["renew", "one", "--force", "--config", config], { timeoutMs: 60_000 });
		if (renew.code !== 0) throw new Error(`renew failed: ${renew.stderr}`);
		return (performance.now() - t0) / 1000;
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
}
