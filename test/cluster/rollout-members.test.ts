/**
 * A canary rollout in cluster mode: two members sharing their state through a real etcd (the store the engine
 * gives rollouts in a cluster), each running the HAProxy nodes it owns (four real haproxy-runtime nodes). The
 * member that owns the canary verifies it and moves the rollout to its hold; the other member, which owns only
 * rest endpoints, keeps them on the old certificate through the hold; when the first member is gone and the
 * second takes over every node, it continues the same rollout (same start, same hold) to the end.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../src/certificates/index.js";
import { connectEtcd } from "../../src/cluster/etcd.js";
import { createEtcdStore } from "../../src/cluster/etcd-store.js";
import { runCycle } from "../../src/reconcile/cycle.js";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import { createRolloutCoordinator } from "../../src/reconcile/rollout.js";
import type { RolloutPolicy } from "../../src/reconcile/rollout-stages.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";
import { scaled } from "../harness/deadline.js";
import { type EtcdHandle, startEtcd } from "../harness/etcd.js";
import type { Haproxy } from "../harness/haproxy.js";
import { rig, servedSerial } from "../harness/targets.js";

let etcd: EtcdHandle;
let root: TestIssuer;
const r = rig({ reloadSafe: true });
const key = randomBytes(32);

beforeAll(async () => {
	etcd = await startEtcd();
	root = await createTestCa("cluster rollout root");
});
afterAll(async () => {
	await etcd?.stop();
});

const want = (leaf: TestLeaf): DesiredCertificate => ({
	name: "web",
	names: ["web.test"],
	bundle: parseBundle({ combined: leaf.combinedPem }, { source: "test" }),
	origin: "test",
});

describe("rollout across cluster members (real etcd, real HAProxy)", () => {
	it("the canary's member moves the stage, the other holds its nodes, a takeover continues the rollout", async () => {
		const v1 = await issueTestLeaf(root, { names: ["web.test"] });
		const nodes: Haproxy[] = await Promise.all(
			[1, 2, 3, 4].map(() => r.haproxy({ crtDir: { "web.pem": v1.combinedPem } })),
		);
		const holdMs = scaled(2000);
		const policy: RolloutPolicy = { canary: { count: 1 }, verify: ["serial", "chain"], holdMs };
		const prefix = `rollout-${randomBytes(4).toString("hex")}/`;
		const member = (owned: (name: string) => boolean) => {
			const conn = connectEtcd({ endpoints: etcd.endpoints, prefix, deadline_ms: 2000 });
			const store = createEtcdStore(conn, { encryptionKey: key });
			r.onTeardown(async () => {
				await store.close();
				conn.close();
			});
			const targets = nodes.map((h, i) =>
				r.runtime(h, { name: `lb${i + 1}` }, { owns: (target) => owned(target) }),
			);
			const rollout = createRolloutCoordinator({ store, policy, readOnly: false, now: () => new Date() });
			return (desired: DesiredCertificate[]) =>
				runCycle(
					{
						loadDesired: async () => ({ certificates: desired, problems: [] }),
						targets,
						now: () => new Date(),
						rollout,
					},
					"sync",
					new AbortController().signal,
				);
		};
		const a = member((t) => t === "lb1" || t === "lb2");
		const b = member((t) => t === "lb3" || t === "lb4");
		const served = () => Promise.all(nodes.map((h) => servedSerial(h, "web.test")));
		const v2 = await issueTestLeaf(root, { names: ["web.test"] });

		// B first: it starts the rollout (canary lb1, which A owns) and holds its own nodes.
		const b1 = await b([want(v2)]);
		expect(b1.rollouts?.[0]).toMatchObject({ stage: "canary", canaries: ["lb1/lb1"] });
		expect(b1.targets.flatMap((t) => t.endpoints.flatMap((e) => e.held ?? [])).map((h) => h.code)).toEqual([
			"ROLLOUT_CANARY",
			"ROLLOUT_CANARY",
		]);
		// A runs the canary, verifies it: hold, written to etcd.
		const a1 = await a([want(v2)]);
		const rollout = a1.rollouts?.[0];
		expect(rollout).toMatchObject({
			stage: "hold",
			verified: ["lb1/lb1"],
			startedAt: b1.rollouts?.[0]?.startedAt,
		});
		expect(await served()).toEqual([v2.serial, v1.serial, v1.serial, v1.serial]);
		// B sees the hold A wrote and keeps its nodes on the old certificate.
		const b2 = await b([want(v2)]);
		if (Date.now() < Date.parse(rollout?.holdUntil ?? "")) {
			expect(b2.rollouts?.[0]).toMatchObject({ stage: "hold", holdUntil: rollout?.holdUntil });
			expect((await served()).slice(2)).toEqual([v1.serial, v1.serial]);
		}

		// A is gone; B takes every node over and carries the same rollout to the end.
		const takeover = member(() => true);
		let last = await takeover([want(v2)]);
		const deadline = Date.now() + holdMs + scaled(20_000);
		while (last.rollouts?.[0]?.stage !== "rest") {
			expect(Date.now()).toBeLessThan(deadline);
			expect(last.rollouts?.[0]?.stage).toBe("hold");
			expect((await served()).slice(1)).toEqual([v1.serial, v1.serial, v1.serial]);
			last = await takeover([want(v2)]);
		}
		expect(last.rollouts?.[0]?.startedAt).toBe(rollout?.startedAt);
		expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(rollout?.holdUntil ?? ""));
		expect(await served()).toEqual([v2.serial, v2.serial, v2.serial, v2.serial]);
	});
});
