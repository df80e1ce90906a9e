import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessionMarginMs } from "../../src/cluster/session.js";
import { eventually, startMember, type TestMember, uniquePrefix, warnings } from "../harness/cluster.js";
import { type EtcdHandle, startEtcd } from "../harness/etcd.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The server's remaining TTL of a lease, seconds; -1 once it is gone. */
async function serverTtl(m: TestMember, id: string): Promise<number> {
	const res = await m.conn.client.leaseClient.leaseTimeToLive({ ID: id });
	return Number(res.TTL);
}

describe("cluster session (real etcd)", () => {
	let etcd: EtcdHandle;
	const members: TestMember[] = [];
	const member = (ttlSeconds: number, clock?: () => number) => {
		const m = startMember(etcd.endpoints, uniquePrefix(), `s${members.length}`, {
			ttlSeconds,
			...(clock ? { clock } : {}),
		});
		members.push(m);
		return m;
	};
	beforeAll(async () => {
		etcd = await startEtcd();
	});
	afterAll(async () => {
		await Promise.all(members.map((m) => m.close()));
		await etcd?.stop();
	});

	it("grants one lease valid for TTL minus the margin from the grant's send time; close() revokes it", async () => {
		const start = 1_000_000;
		const m = member(3, () => start);
		const id = await eventually("lease granted", () => m.session.leaseId(), 5000);
		expect(m.session.validUntil()).toBe(start + 3000 - sessionMarginMs(3));
		expect(m.session.valid()).toBe(true);
		expect(m.session.valid(start + 3000 - sessionMarginMs(3))).toBe(false);
		expect(await serverTtl(m, id)).toBeGreaterThan(0);
		let changes = 0;
		m.session.onChange(() => changes++);
		await m.session.close();
		expect(changes).toBeGreaterThan(0);
		expect(m.session.valid()).toBe(false);
		expect(m.session.leaseId()).toBeUndefined();
		const other = member(3);
		await eventually("other granted", () => other.session.leaseId(), 5000);
		expect(await serverTtl(other, id)).toBe(-1);
	});

	it("extends validUntil from the time the acknowledged keepalive was SENT, not when its answer came", async () => {
		let now = 1_000_000;
		const m = member(3, () => now);
		await eventually("lease granted", () => m.session.leaseId(), 5000);
		const before = m.session.validUntil();
		// etcd frozen: keepalives go out (at "sent") and wait; they are answered after the clock moved on.
		await etcd.pause(0);
		const sent = 2_000_000;
		now = sent;
		await sleep(1200); // > TTL/3: at least one keepalive fired while frozen
		now = 3_000_000;
		etcd.resume(0);
		const after = await eventually(
			"keepalive answered",
			() => m.session.validUntil() !== before && m.session.validUntil(),
			3000,
		);
		expect(after).toBe(sent + 3000 - sessionMarginMs(3));
	});

	it("grants exactly one new lease after the lease is revoked behind its back", async () => {
		const m = member(2);
		const first = await eventually("lease granted", () => m.session.leaseId(), 5000);
		let changes = 0;
		m.session.onChange(() => changes++);
		await m.conn.client.leaseClient.leaseRevoke({ ID: first });
		const second = await eventually(
			"new lease",
			() => m.session.leaseId() !== first && m.session.leaseId(),
			5000,
		);
		expect(m.session.valid()).toBe(true);
		expect(changes).toBeGreaterThanOrEqual(2); // lost, granted
		await sleep(1000);
		expect(m.session.leaseId()).toBe(second);
		// One grant per loss: the server knows this member's new lease and no other of its own.
		const { leases } = await m.conn.client.leaseClient.leaseLeases();
		const others = members.filter((o) => o !== m).map((o) => o.session.leaseId());
		expect(leases.map((l) => l.ID).filter((x) => !others.includes(x))).toEqual([second]);
		expect(warnings(m.lines).map((l) => l.msg)).toEqual(["etcd lease lost; granting a new one"]);
	});

	it("survives etcd down at start and while running: invalid, warnings, a new lease once etcd is back", async () => {
		const running = member(2);
		const old = await eventually("lease granted", () => running.session.leaseId(), 5000);
		await etcd.kill(0);
		const starting = member(2);
		await eventually("running member invalid", () => !running.session.valid(), 5000);
		await sleep(2500); // the client gives up on the old lease only after 2 x TTL
		expect(starting.session.leaseId()).toBeUndefined();
		expect(warnings(starting.lines).length).toBeGreaterThan(0);
		await etcd.restart(0);
		await eventually("starting member granted", () => starting.session.valid(), 15_000);
		await eventually("running member valid again", () => running.session.valid(), 15_000);
		// Down for 2 x TTL: etcd restored the old lease with a fresh TTL, or the client gave it up and got a new one.
		const now = running.session.leaseId();
		expect(now).toBeDefined();
		expect(await serverTtl(running, now!)).toBeGreaterThan(0);
		void old;
	}, 60_000);
});
