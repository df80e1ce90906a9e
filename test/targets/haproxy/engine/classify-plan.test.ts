import { beforeAll, describe, expect, it } from "vitest";
import { chainFingerprints, droppedNames, parseBundle } from "../../../../src/certificates/index.js";
import type { DesiredCertificate, RefMeta, ServedCertificate } from "../../../../src/reconcile/model.js";
import { classifyEndpoint, type DuplicatePolicy } from "../../../../src/targets/haproxy/engine/classify.js";
import type { ObservedRef } from "../../../../src/targets/haproxy/engine/model.js";
import { planEndpoint } from "../../../../src/targets/haproxy/engine/plan.js";
import { checkNameRemoval } from "../../../../src/targets/haproxy/guard.js";
import { createTestCa, issueTestLeaf } from "../../../harness/certs.js";
import { desiredCert, metaOf, oldMeta, ref, removePolicy } from "../../../reconcile/scenario.js";

let keeper: DesiredCertificate;
let other: DesiredCertificate;

beforeAll(async () => {
	keeper = await desiredCert("barsone", ["barsone.test", "www.barsone.test"]);
	other = await desiredCert("other", ["other.test"]);
});

function run(
	refs: ObservedRef[],
	options: {
		desired?: DesiredCertificate[];
		policy?: DuplicatePolicy;
		served?: ServedCertificate[];
		crtList?: string;
		knownPinned?: ReadonlyMap<string, string>;
		reinserts?: boolean;
	} = {},
) {
	const desired = (options.desired ?? [keeper]).map((c) => ({ ref: `${c.name}.pem`, certificate: c }));
	const policy = options.policy ?? removePolicy;
	const verdicts = classifyEndpoint({
		desired,
		refs,
		policy,
		...(options.served ? { served: options.served } : {}),
		...(options.knownPinned ? { knownPinned: options.knownPinned } : {}),
	});
	const plan = planEndpoint({
		verdicts,
		desired: new Map(desired.map((d) => [d.certificate.name, d.certificate])),
		refs: new Map(refs.map((r) => [r.ref, r])),
		runtimeNameFor: (r) => `/etc/haproxy/ssl/${r}`,
		newCertificateCrtList: options.crtList ?? "/etc/haproxy/ssl",
		legacyDuplicates: policy.legacyDuplicates,
		...(options.served ? { served: options.served } : {}),
		reinserts: options.reinserts ?? false,
	});
	return {
		plan,
		verdicts,
		classes: Object.fromEntries(verdicts.map((v) => ["ref" in v ? v.ref : `sni:${v.sni}`, v.class])),
		ops: plan.steps.map((s) => `${s.action.op} ${s.action.ref}`),
		whys: plan.steps.map((s) => s.why),
		notes: plan.notes,
	};
}

describe("haproxy engine: classify + plan", () => {
	it("plans nothing for a converged endpoint", () => {
		const r = run([ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) })]);
		expect(r.classes).toEqual({ "barsone.pem": "in-sync" });
		expect(r.ops).toEqual([]);
	});

	it("writes only the stale side: runtime behind storage gets a runtime set, no storage write", () => {
		const r = run([ref("barsone.pem", { storage: metaOf(keeper), runtime: oldMeta(keeper.names) })]);
		expect(r.classes["barsone.pem"]).toBe("stale");
		expect(r.ops).toEqual(["runtime-set barsone.pem"]);
	});

	it("renews storage first, then runtime", () => {
		const r = run([ref("barsone.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) })]);
		expect(r.ops).toEqual(["storage-replace barsone.pem", "runtime-set barsone.pem"]);
	});

	it("creates a missing certificate and makes it live through the crt-list", () => {
		const r = run([]);
		expect(r.classes["barsone.pem"]).toBe("missing");
		expect(r.ops).toEqual(["storage-create barsone.pem", "runtime-add barsone.pem"]);
	});

	it("without a crt-list, a new certificate is written and reported as pending a reload, never reloaded", () => {
		const desired = [keeper].map((c) => ({ ref: `${c.name}.pem`, certificate: c }));
		const verdicts = classifyEndpoint({ desired, refs: [], policy: removePolicy });
		const plan = planEndpoint({
			verdicts,
			desired: new Map([[keeper.name, keeper]]),
			refs: new Map(),
			runtimeNameFor: (r) => r,
			legacyDuplicates: "remove",
		});
		expect(plan.steps.map((s) => s.action.op)).toEqual(["storage-create"]);
		expect(plan.notes[0]).toMatch(/after its next reload/);
	});

	it("the seed: a stable keeper's duplicate is removed from crt-list, runtime, then storage", () => {
		const r = run([
			ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
			ref("legacy_barsone.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) }),
		]);
		expect(r.classes["legacy_barsone.pem"]).toBe("legacy-duplicate");
		expect(r.ops).toEqual([
			"crt-list-remove legacy_barsone.pem",
			"runtime-delete legacy_barsone.pem",
			"storage-delete legacy_barsone.pem",
		]);
	});

	it("keeper not stable: the duplicate is synced like any certificate, not deleted", () => {
		const r = run([
			ref("barsone.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) }),
			ref("legacy_barsone.pem", {
				storage: oldMeta(keeper.names, "0BEE"),
				runtime: oldMeta(keeper.names, "0BEE"),
			}),
		]);
		expect(r.verdicts.find((v) => v.class === "legacy-duplicate")).toMatchObject({ keeperStable: false });
		expect(r.ops).toEqual([
			"storage-replace barsone.pem",
			"runtime-set barsone.pem",
			"storage-replace legacy_barsone.pem",
			"runtime-set legacy_barsone.pem",
		]);
	});

	it("keeper missing from storage: the duplicate is synced, and the keeper is created", () => {
		const r = run([
			ref("barsone.pem", { runtime: metaOf(keeper) }),
			ref("legacy_barsone.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) }),
		]);
		expect(r.ops).toEqual([
			"storage-create barsone.pem",
			"storage-replace legacy_barsone.pem",
			"runtime-set legacy_barsone.pem",
		]);
	});

	it("a duplicate already gone from storage is finished off in runtime and never written to storage", () => {
		const stable = run([
			ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
			ref("legacy_barsone.pem", { runtime: oldMeta(keeper.names) }),
		]);
		expect(stable.classes["legacy_barsone.pem"]).toBe("deleted-pending-reload");
		expect(stable.ops).toEqual(["crt-list-remove legacy_barsone.pem", "runtime-delete legacy_barsone.pem"]);
		const unstable = run([
			ref("barsone.pem", { storage: metaOf(keeper), runtime: oldMeta(keeper.names) }),
			ref("legacy_barsone.pem", { runtime: oldMeta(keeper.names) }),
		]);
		expect(unstable.ops).toEqual(["runtime-set barsone.pem", "runtime-set legacy_barsone.pem"]);
	});

	it("a ref the Data Plane API cannot address (its name is sanitised to the keeper's) is unaddressable: nothing planned", () => {
		const r = run([
			ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
			{
				...ref("bars.one.pem", { storage: {}, runtime: oldMeta(keeper.names) }),
				crtLists: ["/etc/haproxy/ssl"],
				unaddressable: { addressedAs: "bars_one.pem" },
			},
		]);
		expect(r.classes["bars.one.pem"]).toBe("unaddressable");
		expect(r.verdicts.find((v) => v.class === "unaddressable")).toMatchObject({
			addressedAs: "bars_one.pem",
			certificate: "barsone",
			why: expect.stringMatching(/Rename the file on disk/),
		});
		// Not removed (its storage delete would reach another file), not synced (memory only: a reload undoes it).
		expect(r.ops).toEqual([]);
	});

	it("a duplicate referenced by a crt line is pinned: kept current, never deleted", () => {
		const r = run([
			ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
			ref("legacy_barsone.pem", {
				storage: oldMeta(keeper.names),
				runtime: oldMeta(keeper.names),
				crtLists: [],
			}),
		]);
		expect(r.classes["legacy_barsone.pem"]).toBe("pinned");
		expect(r.ops).toEqual(["storage-replace legacy_barsone.pem", "runtime-set legacy_barsone.pem"]);
	});

	it("a duplicate whose removal an earlier cycle saw refused (409) is pinned: synced, its delete not retried", () => {
		const refs = [
			ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
			ref("legacy_barsone.pem", { storage: oldMeta(keeper.names) }),
		];
		expect(run(refs).ops).toEqual(["storage-delete legacy_barsone.pem"]);
		const r = run(refs, { knownPinned: new Map([["legacy_barsone.pem", "409: haproxy.cfg references it"]]) });
		expect(r.classes["legacy_barsone.pem"]).toBe("pinned");
		expect(r.ops).toEqual(["storage-replace legacy_barsone.pem"]);
	});

	it("legacy_duplicates: report keeps duplicates synced and reported", () => {
		const r = run(
			[
				ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
				ref("legacy_barsone.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) }),
			],
			{ policy: { legacyDuplicates: "report", allowNameRemoval: false } },
		);
		expect(r.classes["legacy_barsone.pem"]).toBe("legacy-duplicate");
		expect(r.ops).toEqual(["storage-replace legacy_barsone.pem", "runtime-set legacy_barsone.pem"]);
	});

	it("ambiguous groups are left alone: two candidate keepers, or overlapping SAN sets", async () => {
		const twin = await desiredCert("barsone-twin", ["barsone.test", "www.barsone.test"]);
		const two = run(
			[
				ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
				ref("barsone-twin.pem", { storage: metaOf(twin), runtime: metaOf(twin) }),
				ref("legacy.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) }),
			],
			{ desired: [keeper, twin] },
		);
		expect(two.classes["legacy.pem"]).toBe("ambiguous");
		expect(two.ops).toEqual([]);
		const overlap = run([
			ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
			ref("partial.pem", { storage: oldMeta(["barsone.test"]), runtime: oldMeta(["barsone.test"]) }),
		]);
		expect(overlap.classes["partial.pem"]).toBe("ambiguous");
		expect(overlap.ops).toEqual([]);
	});

	it("unmanaged refs are reported with their expiry and never written", () => {
		const r = run([
			ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
			ref("somebody-else.pem", { storage: oldMeta(["else.test"]), runtime: oldMeta(["else.test"]) }),
		]);
		expect(r.verdicts.find((v) => v.class === "unmanaged")).toMatchObject({
			ref: "somebody-else.pem",
			names: ["else.test"],
		});
		expect(r.ops).toEqual([]);
	});

	it("refuses an update that would stop covering a name the current certificate covers", () => {
		const r = run([
			ref("barsone.pem", {
				storage: oldMeta([...keeper.names, "legacy.barsone.test"]),
				runtime: oldMeta([...keeper.names, "legacy.barsone.test"]),
			}),
		]);
		expect(r.verdicts[0]).toMatchObject({ class: "refused" });
		expect(r.ops).toEqual([]);
		const allowed = run(
			[
				ref("barsone.pem", {
					storage: oldMeta([...keeper.names, "x.test"]),
					runtime: oldMeta([...keeper.names, "x.test"]),
				}),
			],
			{ policy: { legacyDuplicates: "remove", allowNameRemoval: true } },
		);
		expect(allowed.ops).toEqual(["storage-replace barsone.pem", "runtime-set barsone.pem"]);
	});

	it("a probe that sees another ref's certificate marks the name shadowed and names the culprit", () => {
		const dup = oldMeta(keeper.names, "0D0D");
		const r = run(
			[
				ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
				ref("legacy_barsone.pem", { storage: dup, runtime: dup }),
			],
			{
				served: [
					{ sni: "barsone.test", serial: "0D0D", fingerprint: "", names: keeper.names, notAfter: new Date() },
				],
			},
		);
		expect(r.verdicts.find((v) => v.class === "shadowed")).toMatchObject({
			sni: "barsone.test",
			servedBy: "legacy_barsone.pem",
		});
	});

	it("a keeper serving its own old certificate is stale, not shadowed", () => {
		const old = oldMeta(keeper.names, "0E0E");
		const r = run([ref("barsone.pem", { storage: old, runtime: old })], {
			served: [
				{ sni: "barsone.test", serial: "0E0E", fingerprint: "", names: keeper.names, notAfter: new Date() },
			],
		});
		expect(r.classes["barsone.pem"]).toBe("stale");
		expect(r.verdicts.filter((v) => v.class === "shadowed")).toEqual([]);
	});

	it("the RSA twin of an ECDSA keeper is not its duplicate: unmanaged, never overwritten, never removed", () => {
		const rsaTwin = { ...oldMeta(keeper.names, "0AA1"), keyType: "rsa" as const };
		const r = run([
			ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
			ref("barsone-rsa.pem", { storage: rsaTwin, runtime: rsaTwin }),
		]);
		expect(r.classes["barsone-rsa.pem"]).toBe("unmanaged");
		expect(r.ops).toEqual([]);
	});

	it("two desired certificates with the same names and different key types are both kept, each legacy ref going to the keeper of its key type", async () => {
		const rsa = await desiredCert("barsone-rsa", keeper.names, { keyType: "rsa-2048" });
		const oldRsa = { ...oldMeta(keeper.names, "0AA2"), keyType: "rsa" as const };
		const r = run(
			[
				ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
				ref("barsone-rsa.pem", { storage: metaOf(rsa), runtime: metaOf(rsa) }),
				ref("legacy_rsa.pem", { storage: oldRsa, runtime: oldRsa }),
			],
			{ desired: [keeper, rsa] },
		);
		expect(r.classes).toEqual({
			"barsone.pem": "in-sync",
			"barsone-rsa.pem": "in-sync",
			"legacy_rsa.pem": "legacy-duplicate",
		});
		expect(r.verdicts.find((v) => v.class === "legacy-duplicate")).toMatchObject({
			keeper: "barsone-rsa.pem",
		});
		expect(r.ops).toEqual([
			"crt-list-remove legacy_rsa.pem",
			"runtime-delete legacy_rsa.pem",
			"storage-delete legacy_rsa.pem",
		]);
	});

	it("a ref whose IP SANs differ from the desired certificate's is not its duplicate; a DNS-only listing is compared by DNS names", async () => {
		const withIp = await desiredCert("ipcert", ["ip.test", "10.0.0.7"]);
		const otherIp = {
			...metaOf(withIp, { serial: "0C01", sha1: "11".repeat(20) }),
			names: ["10.0.0.8", "ip.test"],
		};
		const full = run([ref("ipcert.pem", {}), ref("legacy_ip.pem", { storage: otherIp })], {
			desired: [withIp],
		});
		expect(full.classes["legacy_ip.pem"]).toBe("ambiguous");
		const dnsOnly = { ...metaOf(withIp, { serial: "0C02", sha1: "22".repeat(20) }), namesDnsOnly: true };
		const listed = run(
			[
				ref("ipcert.pem", {
					storage: metaOf(withIp, { names: ["10.0.0.7", "ip.test"] }),
					runtime: metaOf(withIp, { names: ["10.0.0.7", "ip.test"] }),
				}),
				ref("legacy_ip.pem", { runtime: dnsOnly }),
			],
			{ desired: [withIp] },
		);
		expect(listed.classes["legacy_ip.pem"]).toBe("deleted-pending-reload");
	});

	it("a chain-only change at the source makes both sides stale, whichever way the side shows the chain", async () => {
		const root = await createTestCa("chain root");
		const inter = await createTestCa("chain intermediate", { issuer: root });
		const leaf = await issueTestLeaf(inter, { names: ["chain.test"], intermediates: [inter] });
		const bundle = parseBundle({ combined: leaf.combinedPem }, { source: "t" });
		const chained: DesiredCertificate = { name: "chain", names: ["chain.test"], bundle, origin: "test" };
		const leafOnly: RefMeta = { serial: bundle.leaf.serial, sha1: bundle.leaf.sha1, names: ["chain.test"] };
		const views: Array<[string, RefMeta["chain"], RefMeta["chain"]]> = [
			["files", { kind: "fingerprints", fingerprints: [] }, chainFingerprints(bundle.chain)],
			[
				"HAProxy",
				{ kind: "names", pairs: [] },
				{ kind: "names", pairs: [{ subject: "/CN=chain intermediate", issuer: "/CN=chain root" }] },
			],
			[
				"API runtime",
				{ kind: "last-pair" },
				{ kind: "last-pair", last: { subject: "chain intermediate", issuer: "chain root" } },
			],
			[
				"API storage",
				{ kind: "issuer-cns", cns: ["chain intermediate"] },
				{ kind: "issuer-cns", cns: ["chain intermediate", "chain root"] },
			],
		];
		for (const [, before, after] of views) {
			const stale = run(
				[
					ref("chain.pem", {
						storage: { ...leafOnly, chain: before },
						runtime: { ...leafOnly, chain: before },
					}),
				],
				{
					desired: [chained],
				},
			);
			expect(stale.ops).toEqual(["storage-replace chain.pem", "runtime-set chain.pem"]);
			const synced = run(
				[
					ref("chain.pem", {
						storage: { ...leafOnly, chain: after },
						runtime: { ...leafOnly, chain: after },
					}),
				],
				{
					desired: [chained],
				},
			);
			expect(synced.ops).toEqual([]);
		}
	});

	it("one names-dropped rule, wildcard-aware: www -> *.example is pushed, *.example -> www is refused", async () => {
		const wildcard = await desiredCert("wild", ["*.wild.test"]);
		const up = run(
			[ref("wild.pem", { storage: oldMeta(["www.wild.test"]), runtime: oldMeta(["www.wild.test"]) })],
			{
				desired: [wildcard],
			},
		);
		expect(up.ops).toEqual(["storage-replace wild.pem", "runtime-set wild.pem"]);
		const www = await desiredCert("wild", ["www.wild.test"]);
		const down = run(
			[ref("wild.pem", { storage: oldMeta(["*.wild.test"]), runtime: oldMeta(["*.wild.test"]) })],
			{
				desired: [www],
			},
		);
		expect(down.verdicts[0]).toMatchObject({ class: "refused" });
		expect(droppedNames(["www.wild.test"], ["*.wild.test"])).toEqual([]);
	});

	// The plan (classify) and the write-time guard of both HAProxy drivers use one rule: they agree on every row,
	// including those where an exact comparison of the name lists would refuse (www -> *.wild).
	it.each([
		[["www.wild.test"], ["*.wild.test"], false],
		[["www.wild.test", "api.wild.test"], ["*.wild.test"], false],
		[["*.wild.test"], ["www.wild.test"], true],
		[["wild.test"], ["*.wild.test"], true],
		[["wild.test", "www.wild.test"], ["wild.test"], true],
		[["wild.test"], ["wild.test", "www.wild.test"], false],
	])("names %j -> %j: plan and guard both refuse: %s", async (current, next, refused) => {
		const desired = await desiredCert("wild", next);
		const observed = ref("wild.pem", { storage: oldMeta(current), runtime: oldMeta(current) });
		const verdict = run([observed], { desired: [desired] }).verdicts[0];
		const guard = checkNameRemoval({
			current,
			next: desired.names,
			allowNameRemoval: false,
			endpoint: "lb",
			ref: "wild.pem",
		});
		expect(verdict?.class).toBe(refused ? "refused" : "stale");
		expect(guard?.code).toBe(refused ? "UPDATE_DROPS_NAMES" : undefined);
		expect(droppedNames(current, next).length > 0).toBe(refused);
	});

	it("an Unused keeper is not stable: the duplicate is kept current, not removed, and the plan says why", () => {
		const r = run([
			ref("barsone.pem", {
				storage: metaOf(keeper),
				runtime: metaOf(keeper, { status: "Unused" }),
				crtLists: [],
			}),
			ref("legacy_barsone.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) }),
		]);
		expect(r.verdicts.find((v) => v.class === "legacy-duplicate")).toMatchObject({
			keeperStable: false,
			keeperUnstable: expect.stringMatching(/Unused in HAProxy/),
		});
		expect(r.ops).toEqual(["storage-replace legacy_barsone.pem", "runtime-set legacy_barsone.pem"]);
		expect(r.whys[0]).toMatch(/until barsone.pem is stable: barsone.pem is Unused/);
	});

	it("a keeper absent from a crt-list the duplicate is in is not stable", () => {
		const r = run([
			ref("barsone.pem", {
				storage: metaOf(keeper),
				runtime: metaOf(keeper),
				crtLists: ["/etc/haproxy/ssl"],
			}),
			ref("legacy_barsone.pem", {
				storage: metaOf(keeper),
				runtime: metaOf(keeper),
				crtLists: ["/etc/haproxy/ssl", "/etc/haproxy/other.list"],
			}),
		]);
		expect(r.verdicts.find((v) => v.class === "legacy-duplicate")).toMatchObject({
			keeperStable: false,
			keeperUnstable: "barsone.pem is not in /etc/haproxy/other.list, where the duplicate serves its names",
		});
		expect(r.ops).toEqual([]);
	});

	describe("a keeper update beside a certificate whose names overlap its own", () => {
		const partialNames = ["barsone.test", "partial.test"];
		const soon = new Date(Date.now() + 3 * 86_400_000);
		const refs = () => [
			ref("barsone.pem", {
				storage: metaOf(keeper),
				runtime: { ...oldMeta(keeper.names, "0E01"), notAfter: new Date(Date.now() + 20 * 86_400_000) },
			}),
			ref("partial.pem", {
				storage: { ...oldMeta(partialNames, "0E02"), notAfter: soon },
				runtime: { ...oldMeta(partialNames, "0E02"), notAfter: soon },
			}),
		];
		const probe = (serial: string): ServedCertificate[] => [
			{ sni: "barsone.test", serial, fingerprint: "", names: keeper.names, notAfter: new Date() },
		];

		it("re-inserts the overlapping certificate right after the keeper, so the keeper keeps serving every name", () => {
			const r = run(refs(), { served: probe("0E01"), reinserts: true });
			expect(r.classes["partial.pem"]).toBe("ambiguous");
			expect(r.ops).toEqual(["runtime-set barsone.pem", "runtime-reinsert partial.pem"]);
			expect(r.plan.servingAfter).toEqual([
				{ sni: "barsone.test", ref: "barsone.pem", certificate: "barsone" },
				{ sni: "www.barsone.test", ref: "barsone.pem", certificate: "barsone" },
			]);
			expect(r.plan.shadowed).toEqual([]);
		});

		it("where it cannot re-insert, says before the write that the name goes to the culprit, which expires sooner", () => {
			const r = run(refs(), { served: probe("0E01"), reinserts: false });
			expect(r.ops).toEqual(["runtime-set barsone.pem"]);
			expect(r.plan.servingAfter[0]).toEqual({
				sni: "barsone.test",
				ref: "partial.pem",
				certificate: "barsone",
			});
			expect(r.plan.shadowed).toEqual([
				expect.objectContaining({
					class: "shadowed",
					sni: "barsone.test",
					servedBy: "partial.pem",
					servedSerial: "0E02",
					why: expect.stringMatching(
						/serves partial.pem for barsone.test .*before barsone.pem's current certificate/,
					),
				}),
			]);
		});

		it("outside one crt directory, does not reorder what HAProxy serves when the other certificate serves the name already (a reload would undo it)", () => {
			const inList = refs().map((x) => ({ ...x, crtLists: ["/etc/haproxy/list.txt"] }));
			const r = run(inList, { served: probe("0E02"), reinserts: true });
			expect(r.ops).toEqual(["runtime-set barsone.pem"]);
			expect(r.plan.shadowed.map((v) => v.servedBy)).toEqual(["partial.pem"]);
		});

		it("in one crt directory, file order decides whatever the probe saw: the running worker serves what a reload would", () => {
			const r = run(refs(), { served: probe("0E02"), reinserts: true });
			expect(r.ops).toEqual(["runtime-set barsone.pem", "runtime-reinsert partial.pem"]);
			expect(r.plan.shadowed).toEqual([]);
		});

		it("without a probe, re-inserts only where a crt directory's file order says the keeper served first", () => {
			// scenario.ts puts every ref in /etc/haproxy/ssl (a crt directory): barsone.pem sorts before partial.pem.
			const r = run(refs(), { reinserts: true });
			expect(r.ops).toEqual(["runtime-set barsone.pem", "runtime-reinsert partial.pem"]);
			const inList = refs().map((x) => ({ ...x, crtLists: ["/etc/haproxy/list.txt"] }));
			expect(run(inList, { reinserts: true }).ops).toEqual(["runtime-set barsone.pem"]);
		});

		it("the re-insert carries the files the other ref lives in (its placement: crt file, separate key file)", () => {
			const placed = refs().map((x) =>
				x.ref === "partial.pem"
					? {
							...x,
							placement: {
								via: "crt-dir" as const,
								certFile: "/etc/haproxy/ssl/partial.pem",
								key: { file: "/etc/haproxy/ssl/partial.pem.key", by: "companion" as const },
								extras: { key: "/etc/haproxy/ssl/partial.pem.key" },
							},
						}
					: x,
			);
			const r = run(placed, { served: probe("0E01"), reinserts: true });
			expect(r.plan.steps.map((s) => s.action).find((a) => a.op === "runtime-reinsert")).toEqual({
				op: "runtime-reinsert",
				ref: "partial.pem",
				runtimeName: "/etc/haproxy/ssl/partial.pem",
				files: { cert: "/etc/haproxy/ssl/partial.pem", key: "/etc/haproxy/ssl/partial.pem.key" },
			});
		});

		it("a ref whose files are unknown (PLACEMENT_UNKNOWN) is not re-inserted: the handover is reported", () => {
			const unknown = refs().map((x) =>
				x.ref === "partial.pem"
					? {
							...x,
							placement: {
								via: "crt-store" as const,
								extras: {},
								unknown: "relative to a crt-base not printed",
							},
						}
					: x,
			);
			const r = run(unknown, { served: probe("0E01"), reinserts: true });
			expect(r.ops).toEqual(["runtime-set barsone.pem"]);
			expect(r.plan.shadowed.map((v) => v.servedBy)).toEqual(["partial.pem"]);
		});

		it("a duplicate kept current after the keeper is not a handover: it holds the same certificate", () => {
			const r = run([
				ref("barsone.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) }),
				ref("legacy_barsone.pem", {
					storage: oldMeta(keeper.names, "0BEE"),
					runtime: oldMeta(keeper.names, "0BEE"),
				}),
			]);
			expect(r.plan.shadowed).toEqual([]);
			expect(
				r.plan.servingAfter.every((s) => s.ref === "barsone.pem" || s.ref === "legacy_barsone.pem"),
			).toBe(true);
		});
	});

	it("leaves other desired certificates alone while handling one's duplicate", () => {
		const r = run(
			[
				ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) }),
				ref("other.pem", { storage: metaOf(other), runtime: metaOf(other) }),
			],
			{ desired: [keeper, other] },
		);
		expect(r.ops).toEqual([]);
	});
});

// Both HAProxy kinds plan through classify + plan: one table covers haproxy-runtime and haproxy-dataplane.
describe("haproxy engine: classify + plan: never downgrade", () => {
	/** Days after the desired certificate's expiry (negative: before). */
	const live = (days: number): RefMeta => ({
		...oldMeta(keeper.names, "0A0A"),
		notAfter: new Date(keeper.bundle.leaf.notAfter.getTime() + days * 86_400_000),
	});
	const on: DuplicatePolicy = { ...removePolicy, neverDowngrade: true };
	const pushed = ["storage-replace barsone.pem", "runtime-set barsone.pem"];

	it.each<[string, { storage?: number; runtime?: number }, boolean, string, string[]]>([
		["a newer live certificate, option on", { storage: 30, runtime: 30 }, true, "refused", []],
		[
			"a newer live certificate, option off (default: a rollback on purpose)",
			{ storage: 30, runtime: 30 },
			false,
			"stale",
			pushed,
		],
		[
			"an older live certificate, option on: a renewal is pushed",
			{ storage: -30, runtime: -30 },
			true,
			"stale",
			pushed,
		],
		[
			"only storage newer (another writer's file, not live yet), option on",
			{ storage: 1, runtime: -30 },
			true,
			"refused",
			[],
		],
		["only runtime newer, option on", { storage: -30, runtime: 1 }, true, "refused", []],
		["a newer certificate in storage only, none in runtime, option on", { storage: 30 }, true, "refused", []],
	])("%s: %s", (_, days, neverDowngrade, verdict, ops) => {
		const sides = {
			...(days.storage === undefined ? {} : { storage: live(days.storage) }),
			...(days.runtime === undefined ? {} : { runtime: live(days.runtime) }),
		};
		const r = run([ref("barsone.pem", sides)], { policy: neverDowngrade ? on : removePolicy });
		expect(r.classes["barsone.pem"]).toBe(verdict);
		expect(r.ops).toEqual(ops);
		if (verdict === "refused") expect(r.verdicts[0]).toMatchObject({ code: "UPDATE_WOULD_DOWNGRADE" });
	});

	it("only memory differs from a file holding the desired certificate: memory follows the file, unless memory holds a newer one, option on", () => {
		// A kill between the two writes (or a member that stopped there): the file is ahead, memory follows it.
		const behind = run([ref("barsone.pem", { storage: metaOf(keeper), runtime: live(-30) })], { policy: on });
		expect(behind.classes["barsone.pem"]).toBe("stale");
		expect(behind.ops).toEqual(["runtime-set barsone.pem"]);
		// A member whose desired set is behind read the file before the leader rewrote it, and memory after: it
		// must not push its older certificate into memory (replicas.test's frozen leader did, once).
		const ahead = run([ref("barsone.pem", { storage: metaOf(keeper), runtime: live(30) })], { policy: on });
		expect(ahead.verdicts[0]).toMatchObject({ class: "refused", code: "UPDATE_WOULD_DOWNGRADE" });
		expect(ahead.ops).toEqual([]);
	});

	it("a deliberate replacement (certificatee replace) is pushed over a later expiry, option on", () => {
		const replacement = { reason: "key compromise", by: "alice@host", requestedAt: new Date().toISOString() };
		const r = run([ref("barsone.pem", { storage: live(30), runtime: live(30) })], {
			policy: on,
			desired: [{ ...keeper, replacement }],
		});
		expect(r.classes["barsone.pem"]).toBe("stale");
		expect(r.ops).toEqual(pushed);
	});

	it("checked before the names: a newer certificate with more names is kept as newer, not as names dropped", () => {
		const newer = { ...live(30), names: [...keeper.names, "extra.barsone.test"].sort() };
		const r = run([ref("barsone.pem", { storage: newer, runtime: newer })], { policy: on });
		expect(r.verdicts[0]).toMatchObject({ class: "refused", code: "UPDATE_WOULD_DOWNGRADE" });
		const off = run([ref("barsone.pem", { storage: newer, runtime: newer })]);
		expect(off.verdicts[0]).toMatchObject({ class: "refused", code: "UPDATE_DROPS_NAMES" });
	});
});
