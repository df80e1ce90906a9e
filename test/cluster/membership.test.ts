import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MEMBERS_PREFIX } from "../../src/cluster/membership.js";
import {
	eventually,
	startChildMember,
	startMember,
	type TestMember,
	uniquePrefix,
} from "../harness/cluster.js";
import { type EtcdHandle, startEtcd } from "../harness/etcd.js";
import { type Proc, stopProcess } from "../harness/process.js";

const TTL = 3;
const WITHIN_MS = TTL * 1000 + 2000;
const endpoints = Array.from({ length: 300 }, (_, i) => `haproxy-${i}:9443`);

describe("cluster membership (real etcd)", () => {
	let etcd: EtcdHandle;
	const started: TestMember[] = [];
	const children: Proc[] = [];
	const group = (prefix: string, names: string[]) => {
		const ms = names.map((n) =>
			startMember(etcd.endpoints, prefix, n, { ttlSeconds: TTL, membership: true }),
		);
		started.push(...ms);
		return ms;
	};
	const seeAll = (ms: TestMember[], names: string[]) =>
		ms.every((m) => m.membership!.members().join() === names.join() && m.membership!.fence() !== undefined);
	beforeAll(async () => {
		etcd = await startEtcd();
	});
	afterAll(async () => {
		await Promise.all(children.map((c) => stopProcess(c)));
		await Promise.all(started.map((m) => m.close()));
		await etcd?.stop();
	});

	it("the claim's log line names the etcd key it claimed (issue 25, finding 12: the field `key` is redacted for key material)", async () => {
		const prefix = uniquePrefix();
		const [m] = group(prefix, ["solo"]);
		const claimed = await eventually(
			"the claim is logged",
			() => m?.lines.find((l) => l.msg === "etcd key claimed") as Record<string, unknown> | undefined,
			WITHIN_MS,
		);
		expect(claimed.etcd_key).toBe(`${MEMBERS_PREFIX}solo`);
		expect(JSON.stringify(claimed)).not.toContain("[redacted]");
	});

	it("every member sees the same sorted list and the endpoints split between them, each owned by exactly one", async () => {
		const prefix = uniquePrefix();
		const ms = group(prefix, ["c", "a", "b"]);
		await eventually("all see a, b, c", () => seeAll(ms, ["a", "b", "c"]), 10_000);
		for (const e of endpoints) {
			const owners = ms.filter((m) => m.membership!.owns(e)).map((m) => m.name);
			expect(owners).toHaveLength(1);
			for (const m of ms) expect(m.membership!.owner(e)).toBe(owners[0]);
		}
		const a = ms.find((m) => m.name === "a")!;
		const res = await a.conn.kv.get(`${MEMBERS_PREFIX}a`).exec();
		const kv = res.kvs[0]!;
		expect(JSON.parse(kv.value.toString())).toMatchObject({ member: "a", pid: process.pid });
		expect(kv.lease).toBe(a.session.leaseId());
		expect(a.membership!.fence()).toEqual({ key: `${MEMBERS_PREFIX}a`, createRevision: kv.create_revision });
	});

	it("a member that closes drops out at once; only its endpoints move", async () => {
		const prefix = uniquePrefix();
		const ms = group(prefix, ["a", "b", "c"]);
		await eventually("all see a, b, c", () => seeAll(ms, ["a", "b", "c"]), 10_000);
		const before = new Map(endpoints.map((e) => [e, ms[0]!.membership!.owner(e)]));
		const b = ms[1]!;
		let changes = 0;
		ms[0]!.membership!.onChange(() => changes++);
		await b.close();
		const rest = [ms[0]!, ms[2]!];
		await eventually("a and c see a, c", () => seeAll(rest, ["a", "c"]), WITHIN_MS);
		expect(changes).toBeGreaterThan(0);
		for (const e of endpoints) {
			const owner = rest[0]!.membership!.owner(e);
			if (before.get(e) !== "b") expect(owner).toBe(before.get(e));
			else expect(["a", "c"]).toContain(owner);
		}
	});

	it("a member killed with SIGKILL drops out within TTL + 2 s", async () => {
		const prefix = uniquePrefix();
		const ms = group(prefix, ["a", "b"]);
		const child = startChildMember(etcd.endpoints, prefix, "k", { ttlSeconds: TTL, membership: true });
		children.push(child.proc);
		await eventually("all see a, b, k", () => seeAll(ms, ["a", "b", "k"]), 20_000);
		expect(child.lines().findLast((l) => l.members)?.members).toBeDefined();
		child.proc.child.kill("SIGKILL");
		await eventually("k gone", () => seeAll(ms, ["a", "b"]), WITHIN_MS);
	});

	it("a member whose lease is revoked behind its back registers again under its new lease", async () => {
		const prefix = uniquePrefix();
		const ms = group(prefix, ["a", "b"]);
		await eventually("all see a, b", () => seeAll(ms, ["a", "b"]), 10_000);
		const a = ms[0]!;
		const old = a.membership!.fence()!;
		await a.conn.client.leaseClient.leaseRevoke({ ID: a.session.leaseId()! });
		const renewed = await eventually(
			"a registered again",
			() => a.membership!.fence()?.createRevision !== old.createRevision && a.membership!.fence(),
			WITHIN_MS,
		);
		expect(Number(renewed.createRevision)).toBeGreaterThan(Number(old.createRevision));
		await eventually("both see a, b", () => seeAll(ms, ["a", "b"]), WITHIN_MS);
		const kv = (await a.conn.kv.get(`${MEMBERS_PREFIX}a`).exec()).kvs[0]!;
		expect(kv.lease).toBe(a.session.leaseId());
		expect(kv.create_revision).toBe(renewed.createRevision);
	});
});
