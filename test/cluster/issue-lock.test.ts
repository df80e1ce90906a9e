import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOCKS_PREFIX, tryIssueLock } from "../../src/cluster/issue-lock.js";
import { CertificateeError } from "../../src/errors.js";
import { eventually, startMember, type TestMember, uniquePrefix } from "../harness/cluster.js";
import { type EtcdHandle, startEtcd } from "../harness/etcd.js";

const TTL = 3;

describe("cluster issue lock (real etcd)", () => {
	let etcd: EtcdHandle;
	const started: TestMember[] = [];
	const group = async (names: string[], leadership = false) => {
		const prefix = uniquePrefix();
		const ms = names.map((n) => startMember(etcd.endpoints, prefix, n, { ttlSeconds: TTL, leadership }));
		started.push(...ms);
		await eventually("sessions valid", () => ms.every((m) => m.session.valid()), 10_000);
		return ms;
	};
	const lock = (m: TestMember, name: string, fence?: Parameters<typeof tryIssueLock>[3]) =>
		tryIssueLock(m.conn, m.session, name, fence, { member: m.name });
	const holder = async (m: TestMember, name: string) =>
		(await m.conn.kv.get(`${LOCKS_PREFIX}${name}`).exec()).kvs[0];
	const code = (p: Promise<unknown>) =>
		p.then(
			() => "resolved",
			(e: unknown) => (e instanceof CertificateeError ? e.code : String(e)),
		);
	beforeAll(async () => {
		etcd = await startEtcd();
	});
	afterAll(async () => {
		await Promise.all(started.map((m) => m.close()));
		await etcd?.stop();
	});

	it("is held by one member at a time, on its lease, until released", async () => {
		const [a, b] = await group(["a", "b"]);
		const held = await lock(a!, "www.example.net");
		expect(held).toBeDefined();
		expect(await lock(b!, "www.example.net")).toBeUndefined();
		expect(await lock(a!, "www.example.net")).toBeUndefined(); // one holder, this process included
		const kv = (await holder(a!, "www.example.net"))!;
		expect(kv.value.toString()).toBe("a");
		expect(kv.lease).toBe(a!.session.leaseId());
		expect(await lock(b!, "api.example.net")).toBeDefined(); // another certificate, another lock
		await held!.release();
		expect(await holder(a!, "www.example.net")).toBeUndefined();
		expect(await lock(b!, "www.example.net")).toBeDefined();
	});

	it("goes to exactly one of many concurrent takers", async () => {
		const ms = await group(["a", "b", "c"]);
		const results = await Promise.all(ms.flatMap((m) => [1, 2, 3, 4].map(() => lock(m, "race.example.net"))));
		expect(results.filter((r) => r !== undefined)).toHaveLength(1);
	});

	it("goes with the lease: a holder whose session ends frees it; its late release leaves the next holder's lock", async () => {
		const [a, b] = await group(["a", "b"]);
		const held = await lock(a!, "www.example.net");
		expect(held).toBeDefined();
		await a!.conn.client.leaseClient.leaseRevoke({ ID: a!.session.leaseId()! });
		expect(await lock(b!, "www.example.net")).toBeDefined(); // revoking a lease deletes its keys at once
		await held!.release();
		expect((await holder(b!, "www.example.net"))?.value.toString()).toBe("b");
	});

	it("is refused with CLUSTER_FENCED under a stale leader fence, and nothing is written", async () => {
		const ms = await group(["a", "b"], true);
		const leader = await eventually("a leader", () => ms.find((m) => m.leadership!.isLeader()), 10_000);
		const fence = leader.leadership!.fence()!;
		const ok = await lock(leader, "fenced.example.net", fence);
		expect(ok).toBeDefined();
		await ok!.release();
		await leader.leadership!.close();
		const other = ms.find((m) => m !== leader)!;
		await eventually("the other leads", () => other.leadership!.isLeader(), 5000);
		expect(await code(lock(leader, "fenced.example.net", fence))).toBe("CLUSTER_FENCED");
		expect(await holder(leader, "fenced.example.net")).toBeUndefined();
		expect(await lock(other, "fenced.example.net", other.leadership!.fence())).toBeDefined();
	});

	it("is refused with CLUSTER_UNAVAILABLE without a valid session, and when etcd is down (within the deadline)", async () => {
		const [a] = await group(["a"]);
		const closed = startMember(etcd.endpoints, uniquePrefix(), "closed", { ttlSeconds: TTL });
		await closed.close();
		expect(await code(lock(closed, "x.example.net"))).toBe("CLUSTER_UNAVAILABLE");
		await etcd.kill(0);
		// The RPC's deadline (1 s here) ends it; a hang would end the test at its timeout instead.
		expect(await code(lock(a!, "x.example.net"))).toBe("CLUSTER_UNAVAILABLE");
	});
});
