/**
 * A canary rollout through the built CLI: a YAML config with `rollout` over three haproxy-runtime targets (real
 * HAProxy nodes), a directory source, and every `sync --once` a new process, so each one takes the rollout up
 * from the state directory (a restart between every cycle, the hold included). The reload-safety invariant runs
 * on every node afterEach (the rig).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { CycleReport } from "../../src/reconcile/report.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../harness/certs.js";
import { certificatee, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { scaled } from "../harness/deadline.js";
import { freePorts } from "../harness/ports.js";
import { rig, servedSerial } from "../harness/targets.js";

let root: TestIssuer;
let intermediate: TestIssuer;
const r = rig({ reloadSafe: true });

beforeAll(async () => {
	await ensureBuilt();
	root = await createTestCa("cli rollout root");
	intermediate = await createTestCa("cli rollout intermediate", { issuer: root });
});

describe("cli: rollout over three haproxy-runtime nodes, a new process per cycle", () => {
	it("halts a broken chain at the canary, then rolls the fixed one out after the hold", async () => {
		const names = ["roll.test"];
		const issue = () => issueTestLeaf(root, { names, intermediates: [intermediate] });
		const v1 = await issue();
		const nodes = await Promise.all(
			[1, 2, 3].map(() => r.haproxy({ crtDir: { "roll.pem": v1.combinedPem } })),
		);
		const pids = await Promise.all(nodes.map((h) => h.workerPid()));
		const dir = mkdtempSync(join(tmpdir(), "certificatee-cli-rollout-"));
		const source = mkdtempSync(join(dir, "certs-"));
		writeFileSync(join(dir, "roots.pem"), root.certPem);
		const holdMs = scaled(2000);
		const targets = nodes
			.map(
				(h, i) =>
					`  - { name: lb${i + 1}, type: haproxy-runtime, socket: ${h.adminSocket}, crt_dir: ${h.crtDir}, probe: "${h.address}" }\n`,
			)
			.join("");
		const config = join(dir, "certificatee.yaml");
		writeFileSync(
			config,
			`state_dir: ${join(dir, "state")}\nsources:\n  - { name: files, type: directory, path: ${source} }\ntargets:\n${targets}rollout:\n  canary: 1\n  hold: ${holdMs}ms\n  trust_store: ${join(dir, "roots.pem")}\n`,
		);
		const sync = async () => {
			const out = await certificatee(["sync", "--once", "--json", "--config", config]);
			return { code: out.code, report: JSON.parse(out.stdout) as CycleReport };
		};
		const served = () => Promise.all(nodes.map((h) => servedSerial(h, "roll.test")));

		const broken = await issue();
		writeFileSync(join(source, "roll.pem"), broken.certPem + broken.keyPem);
		const halted = await sync();
		expect(halted.code).toBe(1);
		expect(halted.report.rollouts?.[0]).toMatchObject({
			certificate: "roll",
			stage: "halted",
			canaries: ["lb1/lb1"],
			rest: ["lb2/lb2", "lb3/lb3"],
			failure: { endpoint: "lb1/lb1", check: "trust", code: "ROLLOUT_CHAIN_UNTRUSTED" },
		});
		expect(await served()).toEqual([broken.serial, v1.serial, v1.serial]);

		const plan = await certificatee(["plan", "--config", config]);
		expect(plan.stdout).toContain(`rollout roll (serial ${broken.serial}): halted`);
		expect(plan.stdout).toContain("  1. canary: lb1/lb1 <- now");
		expect(plan.stdout).toContain("  3. rest: lb2/lb2, lb3/lb3");
		expect(plan.stdout).toContain("halted: ROLLOUT_CHAIN_UNTRUSTED on lb1/lb1 (trust)");
		expect(plan.stdout).toContain("held roll: ROLLOUT_HALTED");
		const status = await certificatee(["status", "--config", config]);
		expect(status.stdout).toContain(`rollout roll (serial ${broken.serial}): halted`);

		const fixed = await issue();
		writeFileSync(join(source, "roll.pem"), fixed.combinedPem);
		const canary = await sync();
		expect(canary.report.rollouts?.[0]?.stage).toBe("hold");
		expect(canary.code).toBe(1); // the rest is pending: not converged
		expect(await served()).toEqual([fixed.serial, v1.serial, v1.serial]);
		const holdUntil = Date.parse(canary.report.rollouts?.[0]?.holdUntil ?? "");
		let last = canary;
		const deadline = Date.now() + holdMs + scaled(60_000);
		while (last.report.rollouts?.[0]?.stage !== "rest") {
			expect(Date.now()).toBeLessThan(deadline);
			last = await sync();
			if (last.report.rollouts?.[0]?.stage === "hold")
				expect((await served()).slice(1)).toEqual([v1.serial, v1.serial]);
		}
		expect(Date.now()).toBeGreaterThanOrEqual(holdUntil);
		expect(last.code).toBe(0);
		expect(await served()).toEqual([fixed.serial, fixed.serial, fixed.serial]);
		expect(await Promise.all(nodes.map((h) => h.workerPid()))).toEqual(pids);
	});

	it("the daemon wakes when the hold ends (an interval of an hour does not hold the rest back)", async () => {
		const names = ["wake.test"];
		const v1 = await issueTestLeaf(root, { names, intermediates: [intermediate] });
		const nodes = await Promise.all([1, 2].map(() => r.haproxy({ crtDir: { "wake.pem": v1.combinedPem } })));
		const dir = mkdtempSync(join(tmpdir(), "certificatee-cli-rollout-wake-"));
		const source = mkdtempSync(join(dir, "certs-"));
		const v2 = await issueTestLeaf(root, { names, intermediates: [intermediate] });
		writeFileSync(join(source, "wake.pem"), v2.combinedPem);
		const holdMs = scaled(2000);
		const [port] = await freePorts(1);
		const targets = nodes
			.map(
				(h, i) =>
					`  - { name: lb${i + 1}, type: haproxy-runtime, socket: ${h.adminSocket}, crt_dir: ${h.crtDir}, probe: "${h.address}" }\n`,
			)
			.join("");
		const config = join(dir, "certificatee.yaml");
		writeFileSync(
			config,
			`state_dir: ${join(dir, "state")}\ninterval: 1h\nlisten: 127.0.0.1:${port}\nsources:\n  - { name: files, type: directory, path: ${source} }\ntargets:\n${targets}rollout: { canary: 1, hold: ${holdMs}ms }\n`,
		);
		const daemon = spawnCertificatee(["run", "--config", config]);
		r.onTeardown(() => daemon.stop());
		await daemon.waitForLog(/^cycle finished$/);
		const served = () => Promise.all(nodes.map((h) => servedSerial(h, "wake.test")));
		expect(await served()).toEqual([v2.serial, v1.serial]);
		const started = Date.now();
		await daemon.waitForLog(/^cycle finished$/, {
			from: daemon.logs.length,
			timeoutMs: holdMs + scaled(20_000),
		});
		// The hold's end woke it (plus the loop's 1 s margin), long before the hour.
		expect(Date.now() - started).toBeLessThan(holdMs + scaled(20_000));
		expect(await served()).toEqual([v2.serial, v2.serial]);
	});
});
