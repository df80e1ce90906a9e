/**
 * Canary rollouts over five real HAProxy nodes (five haproxy-runtime targets, one rollout across them): a renewal
 * whose chain misses its intermediate reaches the canary only, is caught there by the trust check on what it
 * serves, and the four others keep serving the old certificate; the fixed renewal goes to the canary, is held,
 * then reaches all five. A restart mid-hold (new targets, a new coordinator, the same state store) continues the
 * rollout at its stage. Served is the truth (TLS probes by SNI); reload-safety afterEach on every node.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { loadTrustStore } from "../../src/certificates/trust.js";
import { renderPlan } from "../../src/cli/print.js";
import { runCycle } from "../../src/reconcile/cycle.js";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import { cycleFailures, cycleOutcome } from "../../src/reconcile/outcome.js";
import type { CycleMode, CycleReport } from "../../src/reconcile/report.js";
import { createRolloutCoordinator } from "../../src/reconcile/rollout.js";
import type { RolloutPolicy } from "../../src/reconcile/rollout-stages.js";
import { openFileStore } from "../../src/store/file-store.js";
import type { BuiltTarget } from "../../src/targets/registry.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";
import { scaled } from "../harness/deadline.js";
import type { Haproxy } from "../harness/haproxy.js";
import { rig, servedSerial } from "../harness/targets.js";
import { desiredWithChain } from "./scenario.js";

let root: TestIssuer;
let intermediate: TestIssuer;
const r = rig({ reloadSafe: true });
const names = ["web.test"];

beforeAll(async () => {
	root = await createTestCa("rollout root");
	intermediate = await createTestCa("rollout intermediate", { issuer: root });
});

const issue = () => issueTestLeaf(root, { names, intermediates: [intermediate] });
const want = (leaf: TestLeaf, chain = leaf.chainPem): DesiredCertificate =>
	desiredWithChain("web", leaf, names, chain);
const noStyle = { paint: (c: { text: string }) => c.text } as Parameters<typeof renderPlan>[1];

interface Fleet {
	nodes: Haproxy[];
	stateDir: string;
	policy: RolloutPolicy;
	/** A process: its own targets and coordinator over the state directory (a restart is a new one). */
	process(): Promise<{
		cycle: (desired: DesiredCertificate[], mode?: CycleMode) => Promise<CycleReport>;
		/** Releases the state directory (its lock), as a process that exits. */
		stop: () => void;
	}>;
	served(): Promise<string[]>;
}

async function fleet(
	first: TestLeaf,
	holdMs: number,
	crtDir: Record<string, string> = { "web.pem": first.combinedPem },
	count = 5,
): Promise<Fleet> {
	const nodes = await Promise.all(Array.from({ length: count }, () => r.haproxy({ crtDir })));
	const stateDir = mkdtempSync(join(tmpdir(), "certificatee-rollout-"));
	writeFileSync(join(stateDir, "roots.pem"), root.certPem);
	const policy: RolloutPolicy = {
		canary: { count: 1 },
		verify: ["serial", "chain", "key-types", "trust"],
		holdMs,
		trust: loadTrustStore(join(stateDir, "roots.pem"), "rollout.trust_store"),
	};
	return {
		nodes,
		stateDir,
		policy,
		async process() {
			const store = await openFileStore(stateDir);
			let open = true;
			const stop = () => {
				if (open) store.close();
				open = false;
			};
			r.onTeardown(stop);
			const targets: BuiltTarget[] = nodes.map((h, i) => r.runtime(h, { name: `lb${i + 1}` }));
			const rollout = createRolloutCoordinator({ store, policy, readOnly: false, now: () => new Date() });
			const cycle = (desired: DesiredCertificate[], mode: CycleMode = "sync") =>
				runCycle(
					{
						loadDesired: async () => ({ certificates: desired, problems: [] }),
						targets,
						now: () => new Date(),
						rollout,
					},
					mode,
					new AbortController().signal,
				);
			return { cycle, stop };
		},
		served: () => Promise.all(nodes.map((h) => servedSerial(h, "web.test"))),
	};
}

const all = (serial: string) => [serial, serial, serial, serial, serial];

describe("canary rollout over five real HAProxy nodes (haproxy-runtime)", () => {
	it("a broken chain halts after the canary (4 nodes keep the old, reported); the fixed one goes to all 5 after the hold", async () => {
		const v1 = await issue();
		const holdMs = scaled(1500);
		const f = await fleet(v1, holdMs);
		const { cycle } = await f.process();
		const pids = await Promise.all(f.nodes.map((h) => h.workerPid()));

		const broken = await issue();
		const halted = await cycle([want(broken, "")]);
		expect(await f.served()).toEqual([broken.serial, v1.serial, v1.serial, v1.serial, v1.serial]);
		const rollout = halted.rollouts?.[0];
		expect(rollout).toMatchObject({ certificate: "web", stage: "halted", canaries: ["lb1/lb1"] });
		expect(rollout?.rest).toEqual(["lb2/lb2", "lb3/lb3", "lb4/lb4", "lb5/lb5"]);
		expect(rollout?.failure).toMatchObject({
			endpoint: "lb1/lb1",
			check: "trust",
			code: "ROLLOUT_CHAIN_UNTRUSTED",
		});
		const failures = cycleFailures(halted);
		expect(failures).toHaveLength(1);
		expect(failures[0]).toMatchObject({ kind: "rollout", code: "ROLLOUT_CHAIN_UNTRUSTED", endpoint: "lb1" });
		expect(failures[0]?.message).toContain(
			"CHAIN_UNTRUSTED: web on canary lb1/lb1: web.test serves a chain that",
		);
		expect(failures[0]?.hint).toContain("CN=rollout intermediate");
		expect(cycleOutcome(halted).converged).toBe(false);
		const rest = halted.targets.slice(1).map((t) => t.endpoints[0]);
		for (const e of rest) {
			expect(e?.steps.map((s) => s.result)).toEqual(["skipped", "skipped"]);
			expect(e?.held?.[0]?.code).toBe("ROLLOUT_CANARY");
		}
		// Halted stays halted: the next cycle checks the canary again and still keeps the four on the old one.
		const again = await cycle([want(broken, "")]);
		expect(again.rollouts?.[0]?.stage).toBe("halted");
		expect(again.targets[1]?.endpoints[0]?.held?.[0]?.code).toBe("ROLLOUT_HALTED");
		expect(await f.served()).toEqual([broken.serial, v1.serial, v1.serial, v1.serial, v1.serial]);

		// A fixed certificate: canary first, verified, held; the rest only after the hold.
		const fixed = await issue();
		const started = Date.now();
		const stages: string[] = [];
		const canary = await cycle([want(fixed)]);
		stages.push(canary.rollouts?.[0]?.stage ?? "?");
		expect(canary.rollouts?.[0]?.verified).toEqual(["lb1/lb1"]);
		expect(await f.served()).toEqual([fixed.serial, v1.serial, v1.serial, v1.serial, v1.serial]);
		const holdUntil = Date.parse(canary.rollouts?.[0]?.holdUntil ?? "");
		let last = canary;
		const deadline = Date.now() + holdMs + scaled(20_000);
		while (last.rollouts?.[0]?.stage !== "rest") {
			expect(Date.now()).toBeLessThan(deadline);
			const before = Date.now();
			last = await cycle([want(fixed)]);
			stages.push(last.rollouts?.[0]?.stage ?? "?");
			if (last.rollouts?.[0]?.stage !== "rest") {
				// Within the hold the four still serve the old certificate.
				expect(before).toBeLessThan(holdUntil);
				expect((await f.served()).slice(1)).toEqual(all(v1.serial).slice(1));
			}
		}
		expect(Date.now()).toBeGreaterThanOrEqual(holdUntil);
		expect(holdUntil - started).toBeGreaterThanOrEqual(holdMs);
		expect(stages[0]).toBe("hold");
		expect(stages.at(-1)).toBe("rest");
		expect(new Set(stages)).toEqual(new Set(["hold", "rest"]));
		expect(await f.served()).toEqual(all(fixed.serial));
		expect(cycleOutcome(last).converged).toBe(true);
		expect(await Promise.all(f.nodes.map((h) => h.workerPid()))).toEqual(pids);
	});

	it("a restart mid-hold continues at the hold (same canaries, same end), and plan shows the stages", async () => {
		const v1 = await issue();
		const holdMs = scaled(3000);
		const f = await fleet(v1, holdMs);
		const first = await f.process();
		const v2 = await issue();
		const held = await first.cycle([want(v2)]);
		const rollout = held.rollouts?.[0];
		expect(rollout?.stage).toBe("hold");

		// A new process: new targets and coordinator, the state read back from the store.
		first.stop();
		const second = await f.process();
		const planned = await second.cycle([want(v2)], "plan");
		expect(planned.rollouts?.[0]).toMatchObject({
			stage: "hold",
			holdUntil: rollout?.holdUntil,
			startedAt: rollout?.startedAt,
		});
		const text = renderPlan(planned, noStyle).join("\n");
		expect(text).toContain(`rollout web (serial ${v2.serial}): hold`);
		expect(text).toContain("1. canary: lb1/lb1, verified on lb1/lb1");
		expect(text).toContain(`2. hold until ${rollout?.holdUntil} <- now`);
		expect(text).toContain("3. rest: lb2/lb2, lb3/lb3, lb4/lb4, lb5/lb5");
		expect(text).toMatch(
			/lb2: 2 change\(s\)\n {4}storage-replace web\.pem[^\n]*\n {4}runtime-set[^\n]*\n {4}held web: ROLLOUT_HOLD: rollout of web/,
		);
		const resumed = await second.cycle([want(v2)]);
		if (Date.now() < Date.parse(rollout?.holdUntil ?? "")) {
			expect(resumed.rollouts?.[0]?.stage).toBe("hold");
			expect((await f.served()).slice(1)).toEqual(all(v1.serial).slice(1));
		}
		let last = resumed;
		const deadline = Date.now() + holdMs + scaled(20_000);
		while (last.rollouts?.[0]?.stage !== "rest") {
			expect(Date.now()).toBeLessThan(deadline);
			last = await second.cycle([want(v2)]);
		}
		expect(last.rollouts?.[0]?.startedAt).toBe(rollout?.startedAt);
		expect(await f.served()).toEqual(all(v2.serial));
	});

	it("key types: where an RSA and an ECDSA certificate share the name, the canary is checked as an ECDSA-only and an RSA-only client", async () => {
		const ec1 = await issue();
		const rsa1 = await issueTestLeaf(root, { names, intermediates: [intermediate], keyType: "rsa-2048" });
		const f = await fleet(
			ec1,
			scaled(60_000),
			{ "web.pem": ec1.combinedPem, "web_rsa.pem": rsa1.combinedPem },
			2,
		);
		const { cycle } = await f.process();
		const ec2 = await issue();
		const rsa2 = await issueTestLeaf(root, { names, intermediates: [intermediate], keyType: "rsa-2048" });
		const report = await cycle([want(ec2), desiredWithChain("web_rsa", rsa2, names, rsa2.chainPem)]);
		const checks = report.targets[0]?.endpoints[0]?.rolloutChecks ?? [];
		expect(checks.filter((c) => c.check === "key-types")).toEqual([
			{ certificate: "web", check: "key-types", ok: true },
			{ certificate: "web_rsa", check: "key-types", ok: true },
		]);
		expect(report.rollouts?.map((x) => [x.certificate, x.stage])).toEqual([
			["web", "hold"],
			["web_rsa", "hold"],
		]);
		// What the two clients get on the canary, and on the node the hold keeps back.
		const [canary, rest] = f.nodes as [Haproxy, Haproxy];
		expect([
			await servedSerial(canary, "web.test", "ec"),
			await servedSerial(canary, "web.test", "rsa"),
		]).toEqual([ec2.serial, rsa2.serial]);
		expect([await servedSerial(rest, "web.test", "ec"), await servedSerial(rest, "web.test", "rsa")]).toEqual(
			[ec1.serial, rsa1.serial],
		);
	});
});
