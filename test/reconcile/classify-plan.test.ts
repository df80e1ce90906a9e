import { beforeAll, describe, expect, it } from "vitest";
import { classifyEndpoint, type DuplicatePolicy } from "../../src/reconcile/classify.js";
import type { DesiredCertificate, ObservedRef, ServedCertificate } from "../../src/reconcile/model.js";
import { planEndpoint } from "../../src/reconcile/plan.js";
import { desiredCert, metaOf, oldMeta, ref, removePolicy } from "./scenario.js";

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
	});
	return {
		verdicts,
		classes: Object.fromEntries(verdicts.map((v) => ["ref" in v ? v.ref : `sni:${v.sni}`, v.class])),
		ops: plan.steps.map((s) => `${s.action.op} ${s.action.ref}`),
		notes: plan.notes,
	};
}

describe("reconcile/classify + plan", () => {
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
