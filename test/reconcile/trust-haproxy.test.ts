/**
 * Chain trust before the push, on a real HAProxy (haproxy-runtime target with `trust_store`): a renewal whose
 * chain misses its intermediate is never written (the file and the served serial stay the old ones) and is
 * reported as a failure naming the certificate; the fixed one goes out the next cycle. Reload-safety afterEach.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { loadTrustStore } from "../../src/certificates/trust.js";
import { createMetrics } from "../../src/metrics/index.js";
import { endpointState } from "../../src/reconcile/convergence.js";
import { endpointFailures } from "../../src/reconcile/failures.js";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import type { EndpointReport } from "../../src/reconcile/report.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";
import { syncOnce as cycle, rig, servedSerial as served, okWrites as writes } from "../harness/targets.js";
import { desiredWithChain } from "./scenario.js";

let root: TestIssuer;
let intermediate: TestIssuer;
const r = rig({ reloadSafe: true });

beforeAll(async () => {
	root = await createTestCa("trust root");
	intermediate = await createTestCa("trust intermediate", { issuer: root });
});

const names = ["trusted.test"];
const issue = () => issueTestLeaf(root, { names, intermediates: [intermediate] });
const want = (leaf: TestLeaf, chain = leaf.chainPem): DesiredCertificate =>
	desiredWithChain("trusted", leaf, names, chain);
const hex = (serial: string) => serial.toUpperCase();

async function untrustedMetric(e: EndpointReport): Promise<string> {
	const m = createMetrics();
	m.recordCycle({
		mode: "sync",
		startedAt: new Date().toISOString(),
		durationMs: 0,
		certificates: [],
		sourceProblems: [],
		targets: [{ target: e.target, kind: "haproxy-runtime", endpoints: [e] }],
	});
	return m.registry.getSingleMetricAsString("certificatee_chain_untrusted");
}

describe("trust_store on a haproxy-runtime target (real HAProxy)", () => {
	it("a chain missing its intermediate is held back and reported; the fixed one is pushed", async () => {
		const v1 = await issue();
		const h = await r.haproxy({ crtDir: { "trusted.pem": v1.combinedPem } });
		const store = join(h.crtDir, "..", "roots.pem");
		await writeFile(store, root.certPem);
		const t = r.runtime(h, { trust_store: store });
		const pid = await h.workerPid();
		const before = await readFile(join(h.crtDir, "trusted.pem"), "utf8");

		const broken = await issue();
		const e = await cycle(t, [want(broken, "")], { expectOk: true });
		expect(writes(e)).toEqual([]);
		expect(e.steps.map((s) => [s.op, s.result])).toEqual([
			["storage-replace", "skipped"],
			["runtime-set", "skipped"],
		]);
		expect(e.steps[0]?.note).toMatch(
			/^CHAIN_UNTRUSTED: certificate trusted: the chain ends at CN=trusted.test/,
		);
		const [failure] = endpointFailures(e);
		expect(failure).toMatchObject({ kind: "trust", code: "CHAIN_UNTRUSTED", certificate: "trusted" });
		expect(failure?.message).toContain("not pushed to target lb1");
		expect(failure?.hint).toContain("CN=trust intermediate");
		expect(endpointState(e).state).toBe("failed");
		expect(await readFile(join(h.crtDir, "trusted.pem"), "utf8")).toBe(before);
		expect(await served(h, "trusted.test")).toBe(hex(v1.serial));
		expect(await untrustedMetric(e)).toContain(
			'certificatee_chain_untrusted{target="lb1",certificate="trusted",code="CHAIN_UNTRUSTED"} 1',
		);

		const fixed = await issue();
		const f = await cycle(t, [want(fixed)], { expectOk: true });
		expect(writes(f)).toEqual(["storage-replace trusted.pem", "runtime-set trusted.pem"]);
		expect(f.held).toBeUndefined();
		expect(endpointState(f).state).toBe("converged");
		expect(await served(h, "trusted.test")).toBe(hex(fixed.serial));
		expect(await untrustedMetric(f)).not.toContain("certificatee_chain_untrusted{");
		expect(await h.workerPid()).toBe(pid);
	});

	it("a target without trust_store pushes the same chain (the check is the store's, not the parser's)", async () => {
		const v1 = await issue();
		const h = await r.haproxy({ crtDir: { "trusted.pem": v1.combinedPem } });
		const t = r.runtime(h);
		const broken = await issue();
		const e = await cycle(t, [want(broken, "")], { expectOk: true });
		expect(writes(e)).toEqual(["storage-replace trusted.pem", "runtime-set trusted.pem"]);
		expect(await served(h, "trusted.test")).toBe(hex(broken.serial));
	});

	it("a certificate's own trust store (certificates[].trust_store) holds its chain back on a target without one", async () => {
		const v1 = await issue();
		const h = await r.haproxy({ crtDir: { "trusted.pem": v1.combinedPem } });
		const file = join(h.crtDir, "..", "roots.pem");
		await writeFile(file, root.certPem);
		const store = loadTrustStore(file, "certificates[0].trust_store");
		const t = r.runtime(h, {}, { certificateTrust: (c) => (c === "trusted" ? store : undefined) });
		const broken = await issue();
		const e = await cycle(t, [want(broken, "")], { expectOk: true });
		expect(writes(e)).toEqual([]);
		expect(endpointFailures(e)[0]).toMatchObject({
			kind: "trust",
			code: "CHAIN_UNTRUSTED",
			certificate: "trusted",
		});
		expect(await served(h, "trusted.test")).toBe(hex(v1.serial));
		const fixed = await issue();
		expect(writes(await cycle(t, [want(fixed)], { expectOk: true }))).toEqual([
			"storage-replace trusted.pem",
			"runtime-set trusted.pem",
		]);
	});
});
