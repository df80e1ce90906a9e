/**
 * Incremental observation of a Data Plane API endpoint (memory.ts), through the engine, against the double in
 * front of a real HAProxy: between full observations only the listings and what certificatee wrote are read,
 * and whatever certificatee did not do that can show without reading every item (a reload, a file added)
 * makes the observation full again, so nothing it missed is reported converged.
 */
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial } from "../../../src/certificates/index.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import type { DpapiDouble } from "../../harness/dpapi-double/index.js";
import { syncOnce as cycle, rig, servedSerial as served, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf as desired } from "../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });

beforeAll(async () => {
	ca = await createTestCa("incremental observation CA");
});

/** The per-certificate GETs the double answered (storage and runtime), from here on. */
function perItemGets(d: DpapiDouble) {
	const at = { storage: d.count("getOneStorageSSLCertificate"), runtime: d.count("getCert") };
	return () => ({
		storage: d.count("getOneStorageSSLCertificate") - at.storage,
		runtime: d.count("getCert") - at.runtime,
	});
}

const NAMES = ["a.inc.test", "b.inc.test", "c.inc.test"];
/** The storage name of a certificate (the API's sanitiser keeps no dot in the stem). */
const fileOf = (name: string) => `${name.replace(/\./g, "_")}.pem`;

async function fleetOfThree(masterRuntime: boolean, every?: number) {
	const leaves = await Promise.all(NAMES.map((n) => issueTestLeaf(ca, { names: [n] })));
	const h = await r.haproxy({
		crtDir: Object.fromEntries(NAMES.map((n, i) => [fileOf(n), leaves[i]!.combinedPem])),
	});
	const d = await r.dpapi(h, masterRuntime ? { masterRuntime: true } : {});
	const t = r.dataplane(h, d, every === undefined ? {} : { full_observation_every: every });
	const want = NAMES.map((n, i) => desired(n, leaves[i]!, [n]));
	return { h, d, t, leaves, want };
}

/**
 * Renews b.inc.test in one sync cycle (the others as in `want`): the cycle writes its file and its runtime
 * certificate, and HAProxy serves the new serial. Returns the new desired set and the per-item GETs of that cycle.
 */
async function renewB({ h, d, t, want }: Awaited<ReturnType<typeof fleetOfThree>>) {
	const renewed = await issueTestLeaf(ca, { names: ["b.inc.test"] });
	const next = [want[0]!, desired("b.inc.test", renewed, ["b.inc.test"]), want[2]!];
	const gets = perItemGets(d);
	const e = await cycle(t, next, { expectOk: true });
	expect(writes(e)).toEqual(["storage-replace b_inc_test.pem", "runtime-set b_inc_test.pem"]);
	expect(await served(h, "b.inc.test")).toBe(normaliseSerial(renewed.serial));
	return { next, gets: gets() };
}

describe("incremental observation (haproxy-dataplane)", () => {
	it("no-op cycles after the first read only the listings; a renewal reads back only what it wrote", async () => {
		const fleet = await fleetOfThree(true);
		const { d, t, want } = fleet;
		let gets = perItemGets(d);
		expect(writes(await cycle(t, want, { expectOk: true }))).toEqual([]);
		// Every file, and every certificate HAProxy holds (its default one too).
		expect(gets()).toEqual({ storage: 3, runtime: 4 });
		gets = perItemGets(d);
		for (let i = 0; i < 3; i++) expect(writes(await cycle(t, want, { expectOk: true }))).toEqual([]);
		expect(gets()).toEqual({ storage: 0, runtime: 0 });

		const renewal = await renewB(fleet);
		const { next } = renewal;
		// The write's own reads only (what HAProxy holds before the update, then its read-back); master_runtime:
		// one /runtime/info after the writes, no second look.
		expect(renewal.gets).toEqual({ storage: 0, runtime: 2 });
		gets = perItemGets(d);
		expect(writes(await cycle(t, next, { expectOk: true }))).toEqual([]);
		// The next cycle reads again exactly what was written: its file and its runtime certificate.
		expect(gets()).toEqual({ storage: 1, runtime: 1 });
	});

	it("a reload between two cycles, with a file changed behind certificatee's back, makes the next observation full and the file is written again", async () => {
		const { h, d, t, want } = await fleetOfThree(true);
		await cycle(t, want, { expectOk: true });
		await cycle(t, want, { expectOk: true });
		// Behind certificatee's back: another certificate in b's file, loaded by a reload.
		const other = await issueTestLeaf(ca, { names: ["b.inc.test"] });
		await writeFile(join(h.crtDir, "b_inc_test.pem"), other.combinedPem, { mode: 0o600 });
		await h.reload();
		expect(await served(h, "b.inc.test")).toBe(normaliseSerial(other.serial));
		const gets = perItemGets(d);
		const e = await cycle(t, want, { expectOk: true });
		expect(gets().storage).toBe(3);
		expect(writes(e)).toEqual(["storage-replace b_inc_test.pem", "runtime-set b_inc_test.pem"]);
		expect(await served(h, "b.inc.test")).toBe(normaliseSerial(want[1]!.bundle.leaf.serial));
	});

	it("a certificate replaced in HAProxy's memory alone is caught at the next full_observation_every-th observation; a file added behind certificatee's back makes the next one full", async () => {
		const { h, d, t, want } = await fleetOfThree(false, 3);
		await cycle(t, want, { expectOk: true });
		// c's certificate replaced in HAProxy's memory through its socket, its file left alone: no listing shows
		// it, so the two incremental observations that follow do not see it ...
		const other = await issueTestLeaf(ca, { names: ["c.inc.test"] });
		const name = join(h.crtDir, "c_inc_test.pem");
		await h.command(`set ssl cert ${name} <<\n${other.combinedPem.trim()}\n`);
		await h.command(`commit ssl cert ${name}`);
		expect(await served(h, "c.inc.test")).toBe(normaliseSerial(other.serial));
		let gets = perItemGets(d);
		for (let i = 0; i < 2; i++) expect(writes(await cycle(t, want, { expectOk: true }))).toEqual([]);
		expect(gets()).toEqual({ storage: 0, runtime: 0 });
		// ... the third since the full one is full, and HAProxy gets the file's certificate again.
		gets = perItemGets(d);
		const caught = await cycle(t, want, { expectOk: true });
		// Full, then full again after its write (through a worker's stats socket: master_runtime false).
		expect(gets().storage).toBe(6);
		expect(writes(caught)).toEqual(["runtime-set c_inc_test.pem"]);
		expect(await served(h, "c.inc.test")).toBe(normaliseSerial(want[2]!.bundle.leaf.serial));

		// A new file in the storage directory: the listing changed, so every item is read again at once.
		const stray = await issueTestLeaf(ca, { names: ["stray.inc.test"] });
		const strayFile = join(h.crtDir, "stray_inc_test.pem");
		await writeFile(strayFile, stray.combinedPem, { mode: 0o600 });
		gets = perItemGets(d);
		await cycle(t, want, { expectOk: true });
		expect(gets().storage).toBe(4);
		// Not desired: gone again before the reload-safety check (it would serve it after a reload).
		await rm(strayFile);
	});

	it("a target's endpoints start their full-observation schedules at spread phases: with 3 endpoints and every 3, each cycle after the first observes exactly one in full, each in turn", async () => {
		const { h, want } = await fleetOfThree(true);
		// Three endpoints in front of the one HAProxy, each through its own double, so each counts its own GETs.
		const doubles = [await r.dpapi(h, { masterRuntime: true })];
		for (let i = 1; i < 3; i++) doubles.push(await r.dpapi(h, { masterRuntime: true }));
		const t = r.dataplane(h, doubles[0]!, {
			full_observation_every: 3,
			endpoints: doubles.map((d, i) => ({
				name: `fra${i + 1}`,
				url: d.url,
				username: d.username,
				password: d.password,
				probe: h.address,
				master_runtime: true,
			})),
		});
		/** Per cycle, the endpoints that read every item again (3 files each). */
		const fullIn = async () => {
			const gets = doubles.map(perItemGets);
			const report = await t.run(want, "sync", new AbortController().signal);
			for (const e of report.endpoints) expect(e.ok, JSON.stringify(e.error)).toBe(true);
			expect(report.endpoints.flatMap((e) => e.steps)).toEqual([]);
			return gets.flatMap((g, i) => (g().storage === 3 ? [`fra${i + 1}`] : []));
		};
		expect(await fullIn()).toEqual(["fra1", "fra2", "fra3"]);
		// fra1 keeps the schedule an endpoint alone has (its 4th observation is the every-3rd); the others start
		// one and two observations ahead.
		const schedule = [];
		for (let c = 2; c <= 7; c++) schedule.push(await fullIn());
		expect(schedule).toEqual([["fra3"], ["fra2"], ["fra1"], ["fra3"], ["fra2"], ["fra1"]]);
	});

	it("a renewal's cycle defers a due scheduled full observation once: the write goes out after the listings alone, the next cycle observes in full", async () => {
		const fleet = await fleetOfThree(true, 3);
		const { d, t, want } = fleet;
		let gets = perItemGets(d);
		// Cycle 1 is full (first); 2 and 3 incremental; 4 would be the every-3rd.
		for (let c = 1; c <= 3; c++) expect(writes(await cycle(t, want, { expectOk: true }))).toEqual([]);
		expect(gets().storage).toBe(3);
		const renewal = await renewB(fleet);
		const { next } = renewal;
		// No item GET but the write's own reads (as on an incremental cycle): the full observation waited.
		expect(renewal.gets).toEqual({ storage: 0, runtime: 2 });
		// Deferred once: the next cycle reads every item (the same desired set, and it would be full anyway).
		gets = perItemGets(d);
		expect(writes(await cycle(t, next, { expectOk: true }))).toEqual([]);
		expect(gets()).toEqual({ storage: 3, runtime: 4 });
	});
});
