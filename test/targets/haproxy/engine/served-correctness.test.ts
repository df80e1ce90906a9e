/**
 * What HAProxy really serves, on a real HAProxy through both HAProxy targets: an RSA + ECDSA pair for the
 * same names (both kept, each served to the clients that pick it), a chain-only change, a wildcard change, an
 * Unused keeper, a keeper renewal beside an overlapping certificate, colliding certificate names. Every test
 * ends with the reload-safety invariant.
 */
import { X509Certificate } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial } from "../../../../src/certificates/index.js";
import { probeServed } from "../../../../src/probe/index.js";
import type { DesiredCertificate } from "../../../../src/reconcile/model.js";
import type { EndpointReport } from "../../../../src/reconcile/report.js";
import type { BuiltTarget } from "../../../../src/targets/registry.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../../harness/certs.js";
import { assertReloadSafe } from "../../../harness/invariant.js";
import { rig, servedSerial as servedTo, syncOnce, okWrites as writes } from "../../../harness/targets.js";
import { desiredFromLeaf as desired } from "../../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig();

beforeAll(async () => {
	ca = await createTestCa("served CA");
});

type Kind = "runtime" | "dataplane";

async function setup(kind: Kind, crtDir: Record<string, string>) {
	const h = await r.haproxy({ crtDir });
	const t = kind === "runtime" ? r.runtime(h) : r.dataplane(h, await r.dpapi(h));
	return { h, t };
}

const cycle = (t: BuiltTarget, want: DesiredCertificate[]) => syncOnce(t, want, { expectOk: true });
const serial = (leaf: TestLeaf) => normaliseSerial(leaf.serial);

describe.each<Kind>(["runtime", "dataplane"])("key types on a real HAProxy (haproxy-%s target)", (kind) => {
	it("an RSA + ECDSA pair is never deleted or overwritten, and each is served to the clients that pick it", async () => {
		const names = ["pair.test", "www.pair.test"];
		const ec = await issueTestLeaf(ca, { names, keyType: "ec-p256" });
		const rsa = await issueTestLeaf(ca, { names, keyType: "rsa-2048" });
		const { h, t } = await setup(kind, { "pair.pem": ec.combinedPem, "pair-rsa.pem": rsa.combinedPem });
		const pid = await h.workerPid();
		const rsaFile = readFileSync(join(h.crtDir, "pair-rsa.pem"), "utf8");

		// Only the ECDSA certificate is desired: its RSA twin is not a duplicate, it is left alone.
		for (let i = 0; i < 3; i++) {
			const e = await cycle(t, [desired("pair", ec, names)]);
			expect(writes(e)).toEqual([]);
			expect(e.verdicts.find((v) => "ref" in v && v.ref === "pair-rsa.pem")?.class).toBe("unmanaged");
		}
		expect(readFileSync(join(h.crtDir, "pair-rsa.pem"), "utf8")).toBe(rsaFile);
		for (const sni of names) {
			expect(await servedTo(h, sni, "ec")).toBe(serial(ec));
			expect(await servedTo(h, sni, "rsa")).toBe(serial(rsa));
		}

		// Both desired, both renewed: both pushed hot, both kept, each served to its clients.
		const ec2 = await issueTestLeaf(ca, { names, keyType: "ec-p256" });
		const rsa2 = await issueTestLeaf(ca, { names, keyType: "rsa-2048" });
		const want = [desired("pair", ec2, names), desired("pair-rsa", rsa2, names)];
		const e = await cycle(t, want);
		expect(writes(e).sort()).toEqual(
			[
				"runtime-set pair-rsa.pem",
				"runtime-set pair.pem",
				"storage-replace pair-rsa.pem",
				"storage-replace pair.pem",
			].sort(),
		);
		expect(e.served.every((s) => s.match)).toBe(true);
		expect(writes(await cycle(t, want))).toEqual([]);
		expect(existsSync(join(h.crtDir, "pair-rsa.pem"))).toBe(true);
		for (const sni of names) {
			expect(await servedTo(h, sni, "ec")).toBe(serial(ec2));
			expect(await servedTo(h, sni, "rsa")).toBe(serial(rsa2));
		}
		expect(await h.workerPid()).toBe(pid);
		await assertReloadSafe(h);
		for (const sni of names) expect(await servedTo(h, sni, "rsa")).toBe(serial(rsa2));
	});
});

describe.each<Kind>(["runtime", "dataplane"])(
	"chains and wildcards on a real HAProxy (haproxy-%s target)",
	(kind) => {
		it("a chain-only change at the source (same leaf, corrected intermediate) is pushed and served", async () => {
			const oldRoot = await createTestCa("old root");
			const newRoot = await createTestCa("new root");
			const inter = await createTestCa("issuing intermediate", { issuer: oldRoot });
			// The same intermediate (name and key) cross-signed by the new root: only the chain differs.
			const crossed = await createTestCa("issuing intermediate", { issuer: newRoot, keys: inter.keys });
			const names = ["chain.test"];
			const leaf = await issueTestLeaf(inter, { names, intermediates: [inter] });
			const corrected = {
				...leaf,
				chainPem: crossed.certPem,
				combinedPem: leaf.certPem + crossed.certPem + leaf.keyPem,
			};
			const { h, t } = await setup(kind, { "chain.pem": leaf.combinedPem });
			const want = [desired("chain", corrected, names)];
			const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256.replace(/:/g, "");
			expect((await probeServed({ address: h.address, sni: "chain.test" })).chain).toEqual([
				fingerprint(inter.certPem),
			]);

			const e = await cycle(t, want);
			expect(writes(e)).toEqual(["storage-replace chain.pem", "runtime-set chain.pem"]);
			const served = await probeServed({ address: h.address, sni: "chain.test" });
			expect(served.serial).toBe(serial(leaf));
			expect(served.chain).toEqual([fingerprint(crossed.certPem)]);
			expect(await h.command(`show ssl cert ${h.crtDir}/chain.pem`)).toContain("new root");
			expect(writes(await cycle(t, want))).toEqual([]);
			await assertReloadSafe(h);
			console.log(
				JSON.stringify(await probeServed({ address: h.address, sni: "chain.test" })),
				await h.command(`show ssl cert ${h.crtDir}/chain.pem`),
			);
			expect((await probeServed({ address: h.address, sni: "chain.test" })).chain).toEqual([
				fingerprint(crossed.certPem),
			]);
		});

		it("an intermediate whose name holds a comma is compared as HAProxy prints it: converged, nothing written", async () => {
			const root = await createTestCa("Example\\, Inc. Root");
			const inter = await createTestCa("Example\\, Inc. Issuing CA", { issuer: root });
			const leaf = await issueTestLeaf(inter, { names: ["comma.test"], intermediates: [inter] });
			const { h, t } = await setup(kind, { "comma.pem": leaf.combinedPem });
			for (let i = 0; i < 2; i++)
				expect(writes(await cycle(t, [desired("comma", leaf, ["comma.test"])]))).toEqual([]);
			await assertReloadSafe(h);
		});

		it("a wildcard replacing the names it covers (www -> *.) is pushed, not refused, and served", async () => {
			const v1 = await issueTestLeaf(ca, { names: ["www.wild.test"] });
			const v2 = await issueTestLeaf(ca, { names: ["*.wild.test"] });
			const { h, t } = await setup(kind, { "wild.pem": v1.combinedPem });
			const e = await cycle(t, [desired("wild", v2, ["*.wild.test"])]);
			expect(e.verdicts[0]?.class).toBe("stale");
			expect(writes(e)).toEqual(["storage-replace wild.pem", "runtime-set wild.pem"]);
			expect((await probeServed({ address: h.address, sni: "www.wild.test" })).serial).toBe(serial(v2));
			expect(writes(await cycle(t, [desired("wild", v2, ["*.wild.test"])]))).toEqual([]);
			await assertReloadSafe(h, { names: ["www.wild.test"] });
		});
	},
);

describe("name collisions on a real HAProxy (haproxy-runtime target)", () => {
	it("two certificates whose names give one ref (from a source) are neither written, and every report says why", async () => {
		const dotted = await issueTestLeaf(ca, { names: ["collide.test"] });
		const underscored = await issueTestLeaf(ca, { names: ["www.collide.test"] });
		const { h, t } = await setup("runtime", {});
		const want = [
			desired("collide.test", dotted, ["collide.test"]),
			desired("collide_test", underscored, ["www.collide.test"]),
		];
		for (let i = 0; i < 2; i++) {
			const e = await cycle(t, want);
			expect(writes(e)).toEqual([]);
			expect(e.notes).toContainEqual(
				expect.stringMatching(/"collide.test" and "collide_test" all become collide_test.pem/),
			);
		}
		expect(existsSync(join(h.crtDir, "collide_test.pem"))).toBe(false);
		await assertReloadSafe(h);
	});
});

describe.each<Kind>(["runtime", "dataplane"])(
	"an Unused keeper on a real HAProxy (haproxy-%s target)",
	(kind) => {
		it("an Unused keeper is not stable: its duplicate is kept current and never removed, and the plan says why", async () => {
			const names = ["unused.test"];
			const keeper = await issueTestLeaf(ca, { names });
			const legacy = await issueTestLeaf(ca, { names });
			const { h, t } = await setup(kind, {
				"a_unused.pem": keeper.combinedPem,
				"legacy_unused.pem": legacy.combinedPem,
			});
			// Someone took the keeper out of the crt directory's list: HAProxy holds it, no bind serves it.
			expect(await h.command(`del ssl crt-list ${h.crtDir} ${h.crtDir}/a_unused.pem`)).toContain("deleted");
			expect(await h.command(`show ssl cert ${h.crtDir}/a_unused.pem`)).toContain("Status: Unused");
			const want = [desired("a_unused", keeper, names)];
			for (let i = 0; i < 3; i++) {
				const e = await cycle(t, want);
				const dup = e.verdicts.find((v) => v.class === "legacy-duplicate");
				expect(dup).toMatchObject({ ref: "legacy_unused.pem", keeperStable: false });
				expect(e.steps.map((s) => s.op)).not.toContain("runtime-delete");
				expect(e.steps.map((s) => s.op)).not.toContain("storage-delete");
				if (i === 0) {
					expect(writes(e)).toEqual(["storage-replace legacy_unused.pem", "runtime-set legacy_unused.pem"]);
					expect(e.steps[0]?.why).toMatch(/a_unused.pem is Unused in HAProxy/);
				}
				expect((await probeServed({ address: h.address, sni: "unused.test" })).serial).toBe(serial(keeper));
			}
			expect(existsSync(join(h.crtDir, "legacy_unused.pem"))).toBe(true);
			await assertReloadSafe(h);
		});
	},
);

describe("a keeper renewal beside a certificate whose names overlap its own (real HAProxy)", () => {
	const names = ["shadow.test", "www.shadow.test"];
	const overlapping = ["shadow.test", "partial.shadow.test"];

	async function scenario(kind: Kind) {
		const keeper = await issueTestLeaf(ca, { names, notAfter: new Date(Date.now() + 20 * 86_400_000) });
		// Older, expiring before the keeper's current certificate; "b_" sorts after "a_": the keeper serves at start.
		const culprit = await issueTestLeaf(ca, {
			names: overlapping,
			notAfter: new Date(Date.now() + 5 * 86_400_000),
		});
		const { h, t } = await setup(kind, {
			"a_shadow.pem": keeper.combinedPem,
			"b_partial.pem": culprit.combinedPem,
		});
		expect((await probeServed({ address: h.address, sni: "shadow.test" })).serial).toBe(serial(keeper));
		const renewed = await issueTestLeaf(ca, { names, notAfter: new Date(Date.now() + 60 * 86_400_000) });
		return { h, t, culprit, renewed, want: [desired("a_shadow", renewed, names)] };
	}

	it("haproxy-runtime: the overlapping certificate is re-inserted behind the keeper, so the renewal is served for every name", async () => {
		const { h, t, culprit, renewed, want } = await scenario("runtime");
		const pid = await h.workerPid();
		const e = await cycle(t, want);
		expect(e.verdicts.find((v) => "ref" in v && v.ref === "b_partial.pem")?.class).toBe("ambiguous");
		expect(writes(e)).toEqual([
			"storage-replace a_shadow.pem",
			"runtime-set a_shadow.pem",
			"runtime-reinsert b_partial.pem",
		]);
		expect(e.servingAfter).toContainEqual({
			sni: "shadow.test",
			ref: "a_shadow.pem",
			certificate: "a_shadow",
		});
		expect(e.verdicts.filter((v) => v.class === "shadowed")).toEqual([]);
		for (const sni of names) {
			expect((await probeServed({ address: h.address, sni })).serial).toBe(serial(renewed));
		}
		// The overlapping certificate keeps serving its own name, untouched.
		expect((await probeServed({ address: h.address, sni: "partial.shadow.test" })).serial).toBe(
			serial(culprit),
		);
		expect(readFileSync(join(h.crtDir, "b_partial.pem"), "utf8")).toBe(culprit.combinedPem);
		expect(writes(await cycle(t, want))).toEqual([]);
		expect(await h.workerPid()).toBe(pid);
		await assertReloadSafe(h);
	});

	it("haproxy-dataplane: the handover is reported before the write as shadowed, naming the culprit, and the report matches what is served", async () => {
		const { h, t, culprit, renewed, want } = await scenario("dataplane");
		const plan = (await t.run(want, "plan", new AbortController().signal)).endpoints[0] as EndpointReport;
		expect(plan.steps.map((s) => `${s.op} ${s.ref}`)).toEqual([
			"storage-replace a_shadow.pem",
			"runtime-set a_shadow.pem",
		]);
		expect(plan.servingAfter).toContainEqual({
			sni: "shadow.test",
			ref: "b_partial.pem",
			certificate: "a_shadow",
		});
		const predicted = plan.verdicts.find((v) => v.class === "shadowed");
		expect(predicted).toMatchObject({ sni: "shadow.test", servedBy: "b_partial.pem" });
		expect(predicted && "why" in predicted ? predicted.why : "").toMatch(
			/before a_shadow.pem's current certificate/,
		);

		const e = await cycle(t, want);
		expect(e.verdicts.find((v) => v.class === "shadowed")).toMatchObject({
			sni: "shadow.test",
			servedBy: "b_partial.pem",
		});
		expect((await probeServed({ address: h.address, sni: "shadow.test" })).serial).toBe(serial(culprit));
		expect((await probeServed({ address: h.address, sni: "www.shadow.test" })).serial).toBe(serial(renewed));
		// A reload restores file order (a_ before b_), so shadow.test changes hands there by design: the one
		// name reported shadowed is left out of the invariant; every other name must serve the same.
		await assertReloadSafe(h, { except: ["shadow.test"] });
		expect((await probeServed({ address: h.address, sni: "shadow.test" })).serial).toBe(serial(renewed));
	});
});
