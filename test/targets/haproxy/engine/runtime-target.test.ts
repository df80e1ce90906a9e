/**
 * The reconciler on a real HAProxy through the haproxy-runtime target: the seed's thrash scenario, the
 * duplicate-SNI hazard, pinned duplicates, renewal and convergence. Served is the truth: every claim is
 * checked with a TLS probe by SNI, and the worker pid proves no reload happened. Every test ends with the
 * reload-safety invariant (afterEach).
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../../harness/certs.js";
import {
	syncOnce as cycle,
	rig,
	servedSerial as served,
	okWrites as writes,
} from "../../../harness/targets.js";
import { desiredFromLeaf as desired } from "../../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });

beforeAll(async () => {
	ca = await createTestCa("reconcile CA");
});

async function setup(
	crtDir: Record<string, string>,
	extra: { pinned?: Record<string, string>; report?: boolean } = {},
) {
	const h = await r.haproxy({ crtDir, ...(extra.pinned ? { pinned: extra.pinned } : {}) });
	const t = r.runtime(h, extra.report ? { legacy_duplicates: "report" } : {});
	return { h, t };
}

describe("reconcile on a real HAProxy (haproxy-runtime target)", () => {
	it("the seed: ten cycles delete the duplicate once, never recreate it, keep the keeper served, no reload", async () => {
		const names = ["barsone.test", "www.barsone.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { h, t } = await setup({
			"barsone.pem": keeper.combinedPem,
			"legacy_barsone.pem": legacy.combinedPem,
		});
		const pid = await h.workerPid();
		const want = [desired("barsone", keeper, names)];
		const perCycle: string[][] = [];
		for (let i = 0; i < 10; i++) perCycle.push(writes(await cycle(t, want)));
		expect(perCycle[0]).toEqual([
			`crt-list-remove legacy_barsone.pem`,
			`runtime-delete legacy_barsone.pem`,
			`storage-delete legacy_barsone.pem`,
		]);
		expect(perCycle.slice(1).flat()).toEqual([]);
		expect(existsSync(join(h.crtDir, "legacy_barsone.pem"))).toBe(false);
		expect(await h.command("show ssl cert")).not.toContain("legacy_barsone.pem");
		for (const sni of names) expect(await served(h, sni)).toBe(keeper.serial.toUpperCase().padStart(2, "0"));
		expect(await h.workerPid()).toBe(pid);
	});

	it("the hazard: a keeper renewal beside a duplicate serves the duplicate; after cleanup the renewal is served", async () => {
		const names = ["hazard.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		// "a_" sorts first: HAProxy inserts (and serves) the keeper's entries first at start.
		const { h, t } = await setup({
			"a_hazard.pem": keeper.combinedPem,
			"legacy_hazard.pem": legacy.combinedPem,
		});
		const pid = await h.workerPid();
		const renewed = await issueTestLeaf(ca, { names });
		// Bare harness first: a runtime update of the keeper alone makes HAProxy serve the duplicate.
		await h.command(`set ssl cert ${h.crtDir}/a_hazard.pem <<\n${renewed.combinedPem.trimEnd()}\n`);
		await h.command(`commit ssl cert ${h.crtDir}/a_hazard.pem`);
		expect(await served(h, "hazard.test")).toBe(normal(legacy.serial));
		// certificatee, cycle 1: the keeper's file is behind (not stable), so the duplicate is kept current too:
		// whatever HAProxy serves is the renewed certificate. Cycle 2: the keeper is stable, the duplicate goes.
		const want = [desired("a_hazard", renewed, names)];
		const e = await cycle(t, want);
		expect(writes(e)).toEqual([
			"storage-replace a_hazard.pem",
			"storage-replace legacy_hazard.pem",
			"runtime-set legacy_hazard.pem",
		]);
		expect(await served(h, "hazard.test")).toBe(normal(renewed.serial));
		expect(writes(await cycle(t, want))).toContain("runtime-delete legacy_hazard.pem");
		expect(await served(h, "hazard.test")).toBe(normal(renewed.serial));
		// The next renewal is served too: nothing shadows the keeper any more.
		const again = await issueTestLeaf(ca, { names });
		const e2 = await cycle(t, [desired("a_hazard", again, names)]);
		expect(writes(e2)).toEqual(["storage-replace a_hazard.pem", "runtime-set a_hazard.pem"]);
		expect(e2.served.every((s) => s.match)).toBe(true);
		expect(await served(h, "hazard.test")).toBe(normal(again.serial));
		expect(await h.workerPid()).toBe(pid);
	});

	it("a duplicate left in runtime by an older tool (storage already gone) is finished off, never recreated", async () => {
		const names = ["old.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { h, t } = await setup({ "old.pem": keeper.combinedPem, "legacy_old.pem": legacy.combinedPem });
		const { rm } = await import("node:fs/promises");
		await rm(join(h.crtDir, "legacy_old.pem"));
		const first = await cycle(t, [desired("old", keeper, names)]);
		expect(first.verdicts.find((v) => v.class === "deleted-pending-reload")).toBeDefined();
		expect(writes(first)).toEqual(["crt-list-remove legacy_old.pem", "runtime-delete legacy_old.pem"]);
		for (let i = 0; i < 3; i++) expect(writes(await cycle(t, [desired("old", keeper, names)]))).toEqual([]);
		expect(existsSync(join(h.crtDir, "legacy_old.pem"))).toBe(false);
		expect(await h.command("show ssl cert")).not.toContain("legacy_old.pem");
	});

	it("a duplicate bound by its own crt line outside crt_dir: its file is never touched, it is re-inserted behind the renewed keeper so the renewal is served", async () => {
		const names = ["pin.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { h, t } = await setup(
			{ "pin.pem": keeper.combinedPem },
			{ pinned: { "legacy_pin.pem": legacy.combinedPem } },
		);
		const renewed = await issueTestLeaf(ca, { names });
		const e = await cycle(t, [desired("pin", renewed, names)]);
		// The pinned file is outside crt_dir: never written or removed. The keeper's update would put its SNI
		// entries behind the pinned certificate's, so that one is committed again, with its own file, after it.
		const pinnedPath = join(h.pinnedDir, "legacy_pin.pem");
		expect(writes(e)).toEqual([
			"storage-replace pin.pem",
			"runtime-set pin.pem",
			`runtime-reinsert ${pinnedPath}`,
		]);
		expect(e.verdicts.find((v) => "ref" in v && v.ref === pinnedPath)?.class).toBe("pinned");
		expect(await readFile(pinnedPath, "utf8")).toBe(legacy.combinedPem);
		expect(await served(h, "pin.test")).toBe(normal(renewed.serial));
		expect(await h.workerPid()).toBeGreaterThan(0);
	});

	it("HAProxy's memory behind a file that already holds the desired certificate follows the file, even when another certificate's content is there (two writers crossed), with other names and a later expiry", async () => {
		const names = ["follow.test"];
		const desiredLeaf = await issueTestLeaf(ca, { names });
		// Two writers crossing in HAProxy's one transaction left the store with another certificate's content.
		const crossed = await issueTestLeaf(ca, {
			names: ["crossed.test"],
			notAfter: new Date(Date.now() + 60 * 86_400_000),
		});
		const h = await r.haproxy({ crtDir: { "follow.pem": crossed.combinedPem } });
		const { writeFile } = await import("node:fs/promises");
		await writeFile(join(h.crtDir, "follow.pem"), desiredLeaf.combinedPem, { mode: 0o600 });
		const t = r.runtime(h, {}, { neverDowngrade: true });
		const first = await cycle(t, [desired("follow", desiredLeaf, names)], { expectOk: true });
		expect(first.verdicts.filter((v) => v.class !== "in-sync" && v.class !== "unmanaged")).toMatchObject([
			{ class: "stale", ref: "follow.pem", sides: ["runtime"] },
		]);
		expect(writes(first)).toEqual(["runtime-set follow.pem"]);
		expect(await served(h, "follow.test")).toBe(normal(desiredLeaf.serial));
		expect(writes(await cycle(t, [desired("follow", desiredLeaf, names)]))).toEqual([]);
	});

	it("keeper not stable: the duplicate is synced first, deleted the cycle after", async () => {
		const names = ["ks.test"];
		const old = await issueTestLeaf(ca, { names });
		const { h, t } = await setup({ "ks.pem": old.combinedPem, "legacy_ks.pem": old.combinedPem });
		const renewed = await issueTestLeaf(ca, { names });
		const want = [desired("ks", renewed, names)];
		const first = await cycle(t, want);
		expect(writes(first).sort()).toEqual(
			[
				"runtime-set ks.pem",
				"runtime-set legacy_ks.pem",
				"storage-replace ks.pem",
				"storage-replace legacy_ks.pem",
			].sort(),
		);
		expect(await served(h, "ks.test")).toBe(normal(renewed.serial));
		const second = await cycle(t, want);
		expect(writes(second)).toEqual([
			"crt-list-remove legacy_ks.pem",
			"runtime-delete legacy_ks.pem",
			"storage-delete legacy_ks.pem",
		]);
		expect(writes(await cycle(t, want))).toEqual([]);
	});

	it("legacy_duplicates: report keeps duplicates current and never deletes them", async () => {
		const names = ["rep.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { h, t } = await setup(
			{ "rep.pem": keeper.combinedPem, "legacy_rep.pem": legacy.combinedPem },
			{ report: true },
		);
		const e = await cycle(t, [desired("rep", keeper, names)]);
		expect(writes(e)).toEqual(["storage-replace legacy_rep.pem", "runtime-set legacy_rep.pem"]);
		expect(writes(await cycle(t, [desired("rep", keeper, names)]))).toEqual([]);
		expect(existsSync(join(h.crtDir, "legacy_rep.pem"))).toBe(true);
	});

	it("a missing certificate is created and made live without reload, served for every name as a reload would; unmanaged and ambiguous refs keep their content", async () => {
		const other = await issueTestLeaf(ca, { names: ["other.test"] });
		const partial = await issueTestLeaf(ca, { names: ["new.test"] });
		const { h, t } = await setup({ "other.pem": other.combinedPem, "partial.pem": partial.combinedPem });
		const pid = await h.workerPid();
		const fresh = await issueTestLeaf(ca, { names: ["new.test", "www.new.test"] });
		const e = await cycle(t, [desired("new", fresh, ["new.test", "www.new.test"])]);
		// A reload loads the crt directory in file-name order (new.pem before partial.pem, so new.pem serves
		// new.test); the runtime add appends new.pem behind partial.pem, so partial.pem is committed again, with
		// its own file, right after it: the running worker serves what a reload would.
		expect(writes(e)).toEqual([
			"storage-create new.pem",
			"runtime-add new.pem",
			"runtime-reinsert partial.pem",
		]);
		expect(e.verdicts.find((v) => "ref" in v && v.ref === "other.pem")?.class).toBe("unmanaged");
		expect(e.verdicts.find((v) => "ref" in v && v.ref === "partial.pem")?.class).toBe("ambiguous");
		expect(await readFile(join(h.crtDir, "partial.pem"), "utf8")).toBe(partial.combinedPem);
		expect(await served(h, "www.new.test")).toBe(normal(fresh.serial));
		expect(await served(h, "new.test")).toBe(normal(fresh.serial));
		expect(writes(await cycle(t, [desired("new", fresh, ["new.test", "www.new.test"])]))).toEqual([]);
		expect(await h.workerPid()).toBe(pid);
	});
});

function normal(serial: string): string {
	const hex = serial.toUpperCase().replace(/^0+(?=.)/, "");
	return hex.length % 2 ? `0${hex}` : hex;
}
