/**
 * One writer per HAProxy process (issue 11 item 6), on a real HAProxy 2.6: two haproxy-runtime targets on the
 * same stats socket, each with its own certificates, run concurrently by one cycle. HAProxy has a single
 * certificate transaction per process, so without the shared write queue one target's abort or `set` lands
 * in the other's open transaction. Served is the truth: every name is probed by SNI each round, and every
 * runtime write reported ok is read back from HAProxy. A Data Plane API endpoint in front of the same HAProxy
 * has another address: it shares the queue through the worker both observe (node, pid, start time).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { probeServed } from "../../../../src/probe/index.js";
import { runCycle } from "../../../../src/reconcile/cycle.js";
import type { DesiredCertificate } from "../../../../src/reconcile/model.js";
import { createWriteQueues, type WriteQueues } from "../../../../src/targets/haproxy/engine/writers.js";
import { RuntimeClient } from "../../../../src/targets/haproxy-runtime/socket.js";
import type { BuiltTarget } from "../../../../src/targets/registry.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../../harness/certs.js";
import type { Haproxy } from "../../../harness/haproxy.js";
import { assertReloadSafe } from "../../../harness/invariant.js";
import { rig } from "../../../harness/targets.js";
import { crtDirOf, describeStep, desiredFromLeaf } from "../../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig();

beforeAll(async () => {
	ca = await createTestCa("one writer CA");
});

const PER_TARGET = 8;
const ROUNDS = 5;
const groups = { a: names("a"), b: names("b") };

function names(prefix: string): string[] {
	return Array.from({ length: PER_TARGET }, (_, i) => `${prefix}${i}`);
}

async function issueAll(): Promise<DesiredCertificate[]> {
	return Promise.all(
		[...groups.a, ...groups.b].map(async (name) => {
			const sni = [`${name}.test`];
			return desiredFromLeaf(name, await issueTestLeaf(ca, { names: sni }), sni);
		}),
	);
}

/** A HAProxy holding every certificate of both groups. */
async function startNode(): Promise<{ h: Haproxy; check: RuntimeClient }> {
	const initial = await issueAll();
	const h = await r.haproxy({ crtDir: crtDirOf(initial) });
	const check = new RuntimeClient({ address: h.adminSocket, name: "check" });
	r.onTeardown(() => check.close());
	return { h, check };
}

function runtimeTarget(h: Haproxy, group: "a" | "b", writeQueues: WriteQueues): BuiltTarget {
	return r.runtime(h, { name: `lb1-${group}`, certificates: groups[group] }, { haproxy: { writeQueues } });
}

/** ROUNDS renewals of both groups, the targets run concurrently by one cycle; every round checked. */
async function renewConcurrently(h: Haproxy, check: RuntimeClient, targets: BuiltTarget[]): Promise<void> {
	const pid = await h.workerPid();
	for (let round = 1; round <= ROUNDS; round++) {
		const desired = await issueAll();
		const report = await runCycle(
			{
				loadDesired: async () => ({ certificates: desired, problems: [] }),
				targets,
				now: () => new Date(),
			},
			"sync",
			new AbortController().signal,
		);
		const steps = report.targets.flatMap((t) => t.endpoints.flatMap((e) => e.steps));
		const failed = steps.filter((s) => s.result !== "ok").map(describeStep);
		expect(failed, `round ${round}: every write ok`).toEqual([]);
		expect(steps).toHaveLength(2 * desired.length);
		// No write reported ok that HAProxy does not hold.
		for (const s of steps.filter((x) => x.op === "runtime-set")) {
			const held = await check.showCert(`${h.crtDir}/${s.ref}`);
			expect(held?.serial, `round ${round}: HAProxy holds ${s.ref}`).toBe(s.serial);
		}
		for (const d of desired) {
			const sni = `${d.name}.test`;
			const served = await probeServed({ address: h.address, sni });
			expect(served.serial, `round ${round}: ${sni} serves its renewal`).toBe(d.bundle.leaf.serial);
		}
	}
	expect(await h.workerPid(), "no reload").toBe(pid);
}

describe("one writer per HAProxy process", () => {
	it("two haproxy-runtime targets on one socket with disjoint certificates, run concurrently: every round every name serves its renewal", async () => {
		const { h, check } = await startNode();
		// One registry for the engine, as buildEngine does; each target has its own client and connection.
		const writeQueues = createWriteQueues();
		await renewConcurrently(h, check, [
			runtimeTarget(h, "a", writeQueues),
			runtimeTarget(h, "b", writeQueues),
		]);
		await assertReloadSafe(h);
	});

	it("a Data Plane API target and a haproxy-runtime target on one HAProxy (other addresses, one worker) share the queue", async () => {
		const { h, check } = await startNode();
		const d = await r.dpapi(h);
		const writeQueues = createWriteQueues();
		const api = r.dataplane(h, d, { name: "fra-a", certificates: groups.a }, { haproxy: { writeQueues } });
		await renewConcurrently(h, check, [api, runtimeTarget(h, "b", writeQueues)]);
		await assertReloadSafe(h);
	});
});
