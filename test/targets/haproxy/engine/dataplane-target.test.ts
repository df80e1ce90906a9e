/**
 * The reconciler through the haproxy-dataplane target, against the Data Plane API double in front of a real
 * HAProxy: the seed's thrash scenario and a hot renewal, counted at the API (writes per cycle, zero once
 * converged) and checked by TLS probes, with the worker pid proving no reload happened. Every test ends with
 * the reload-safety invariant (afterEach).
 */
import { X509Certificate } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial } from "../../../../src/certificates/index.js";
import { cycleExitCode } from "../../../../src/cli/exit.js";
import { statusSummary } from "../../../../src/metrics/status-view.js";
import { certificateOnEndpoint, endpointState } from "../../../../src/reconcile/convergence.js";
import { cycleOutcome } from "../../../../src/reconcile/outcome.js";
import type { CycleReport, EndpointReport, TargetReport } from "../../../../src/reconcile/report.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../../harness/certs.js";
import type { DpapiDouble } from "../../../harness/dpapi-double/index.js";
import type { HaproxyOptions } from "../../../harness/haproxy.js";
import { assertReloadSafe } from "../../../harness/invariant.js";
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
	ca = await createTestCa("reconcile dataplane CA");
});

interface Extra {
	trailingSlash?: boolean;
	crtList?: boolean;
	bufsize?: number;
	masterRuntime?: boolean;
}

async function setup(crtDir: Record<string, string>, extra: Extra = {}) {
	return setupWith({ crtDir }, extra);
}

async function setupWith(options: HaproxyOptions, extra: Extra = {}) {
	const h = await r.haproxy(options);
	const d = await r.dpapi(h, extra.masterRuntime ? { masterRuntime: true } : {});
	const t = r.dataplane(h, d, {
		storage_dir: extra.trailingSlash ? `${h.crtDir}/` : h.crtDir,
		...(extra.crtList ? { crt_list: h.crtListPath } : {}),
		...(extra.bufsize ? { bufsize: extra.bufsize } : {}),
	});
	return { h, d, t };
}

const e0Verdicts = (all: EndpointReport["verdicts"][]) =>
	(all[0] ?? []).map((v) => `${v.class} ${"ref" in v ? v.ref : v.sni}`);
const WRITE_OPS = /^(create|replace|delete|add)/;
const apiWrites = (d: DpapiDouble) =>
	Object.entries(d.counts())
		.filter(([op]) => WRITE_OPS.test(op))
		.reduce((n, [, c]) => n + c, 0);

describe("reconcile through the Data Plane API (haproxy-dataplane target)", () => {
	it("the seed: ten cycles delete the duplicate once, never recreate it, keep the keeper served, no reload", async () => {
		const names = ["barsone.test", "www.barsone.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { h, d, t } = await setup({
			"barsone.pem": keeper.combinedPem,
			"legacy_barsone.pem": legacy.combinedPem,
		});
		const pid = await h.workerPid();
		const want = [desired("barsone", keeper, names)];
		const perCycle: string[][] = [];
		const perVerdicts: EndpointReport["verdicts"][] = [];
		const apiPerCycle: number[] = [];
		for (let i = 0; i < 10; i++) {
			const before = apiWrites(d);
			const e = await cycle(t, want);
			expect(e.ok).toBe(true);
			perCycle.push(writes(e));
			perVerdicts.push(e.verdicts);
			apiPerCycle.push(apiWrites(d) - before);
		}
		expect(perCycle[0]).toEqual([
			"crt-list-remove legacy_barsone.pem",
			"runtime-delete legacy_barsone.pem",
			"storage-delete legacy_barsone.pem",
		]);
		expect(perCycle.slice(1).flat()).toEqual([]);
		expect(apiPerCycle).toEqual([3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
		expect(d.count("createStorageSSLCertificate")).toBe(0);
		const legacyRequests = d.requests.filter((r) =>
			decodeURIComponent(r.path + r.query).includes("legacy_barsone"),
		);
		expect(legacyRequests.filter((r) => r.method !== "get").map((r) => r.operation)).toEqual([
			"deleteCrtListEntry",
			"deleteCert",
			"deleteStorageSSLCertificate",
		]);
		expect(existsSync(join(h.crtDir, "legacy_barsone.pem"))).toBe(false);
		// Gone from HAProxy's runtime listing too (crt-list removal, then runtime delete): no reload needed.
		expect((await d.runtime.showCerts()).names.filter((n) => n.includes("legacy_barsone"))).toEqual([]);
		expect(e0Verdicts(perVerdicts)).toContain("legacy-duplicate legacy_barsone.pem");
		for (const sni of names) expect(await served(h, sni)).toBe(normaliseSerial(keeper.serial));
		expect(await h.workerPid()).toBe(pid);
		expect(d.scheduledReloads).toEqual([]);
	});

	it("a pinned duplicate (a direct crt line in haproxy.cfg) is kept current and reported, never deleted, never served old", async () => {
		const names = ["pinned.test", "www.pinned.test"];
		const v1 = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const h = await r.haproxy({
			crtList: [{ file: "pinned.pem", pem: v1.combinedPem }],
			pinned: { "legacy_pinned.pem": legacy.combinedPem },
			pinnedIn: "crt-list",
		});
		const storageDir = join(h.dir, "list");
		const d = await r.dpapi(h, { storageDir });
		const t = r.dataplane(h, d, { storage_dir: storageDir, crt_list: h.crtListPath });
		const pid = await h.workerPid();
		const deletes = () =>
			d.requests.filter((r) => r.method === "delete").map((r) => `${r.operation} ${r.path}`);

		const first = await cycle(t, [desired("pinned", v1, names)]);
		expect(first.ok).toBe(true);
		const pinned = first.verdicts.find((v) => v.class === "pinned");
		expect(pinned).toMatchObject({ ref: "legacy_pinned.pem", keeper: "pinned.pem" });
		expect(writes(first)).toEqual(["storage-replace legacy_pinned.pem", "runtime-set legacy_pinned.pem"]);
		for (const sni of names) expect(await served(h, sni)).toBe(normaliseSerial(v1.serial));

		const settled = apiWrites(d);
		const second = await cycle(t, [desired("pinned", v1, names)]);
		expect(writes(second)).toEqual([]);
		expect(second.verdicts.map((v) => v.class)).toContain("pinned");
		expect(apiWrites(d)).toBe(settled);

		// A renewal of the keeper re-inserts its SNI entries, so HAProxy may now serve the pinned duplicate:
		// it carries the renewal too, so whatever is served is current.
		const v2 = await issueTestLeaf(ca, { names });
		const renewal = await cycle(t, [desired("pinned", v2, names)]);
		expect(writes(renewal).sort()).toEqual(
			[
				"storage-replace pinned.pem",
				"runtime-set pinned.pem",
				"storage-replace legacy_pinned.pem",
				"runtime-set legacy_pinned.pem",
			].sort(),
		);
		for (const sni of names) expect(await served(h, sni)).toBe(normaliseSerial(v2.serial));
		expect(renewal.served.every((s) => s.match)).toBe(true);
		expect(deletes()).toEqual([]);
		expect(existsSync(join(storageDir, "legacy_pinned.pem"))).toBe(true);
		expect(await h.workerPid()).toBe(pid);
		expect(d.scheduledReloads).toEqual([]);
	});

	it("a duplicate in the crt directory that a crt line also names: removal refused 'in use' is reported as pinned, then kept current", async () => {
		const names = ["twice.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { h, d, t } = await setupWith({
			crtDir: { "twice.pem": keeper.combinedPem },
			pinned: { "legacy_twice.pem": legacy.combinedPem },
			pinnedIn: "crt-dir",
		});
		const pid = await h.workerPid();
		const want = [desired("twice", keeper, names)];

		const first = await cycle(t, want);
		expect(first.ok).toBe(true);
		expect(first.steps.map((s) => `${s.op} ${s.result}`)).toEqual([
			"crt-list-remove ok",
			"runtime-delete skipped",
			"storage-delete skipped",
		]);
		expect(first.steps[1]?.note).toMatch(/^pinned: .*crt line/);
		expect(first.verdicts.find((v) => "ref" in v && v.ref === "legacy_twice.pem")?.class).toBe("pinned");
		expect(first.steps.some((s) => s.result === "failed")).toBe(false);

		// Kept current from the next cycle, then converged; its removal is never tried again.
		expect(writes(await cycle(t, want))).toEqual([
			"storage-replace legacy_twice.pem",
			"runtime-set legacy_twice.pem",
		]);
		const settled = apiWrites(d);
		expect(writes(await cycle(t, want))).toEqual([]);
		expect(apiWrites(d)).toBe(settled);
		expect(d.count("deleteCert")).toBe(1);
		expect(d.count("deleteStorageSSLCertificate")).toBe(0);
		expect(existsSync(join(h.crtDir, "legacy_twice.pem"))).toBe(true);

		const v2 = await issueTestLeaf(ca, { names });
		await cycle(t, [desired("twice", v2, names)]);
		expect(await served(h, "twice.test")).toBe(normaliseSerial(v2.serial));
		expect(await h.workerPid()).toBe(pid);
		expect(d.scheduledReloads).toEqual([]);
	});

	it("a storage delete answered 409 is reported as pinned, not a failure, and not retried", async () => {
		const names = ["conflict.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { d, t } = await setupWith({
			crtDir: { "conflict.pem": keeper.combinedPem, "legacy_conflict.pem": legacy.combinedPem },
		});
		d.inject({
			operation: "deleteStorageSSLCertificate",
			kind: "status",
			status: 409,
			message: "rejecting attempt to delete file referenced in haproxy conf",
		});
		const want = [desired("conflict", keeper, names)];
		const first = await cycle(t, want);
		expect(first.steps.map((s) => `${s.op} ${s.result}`)).toEqual([
			"crt-list-remove ok",
			"runtime-delete ok",
			"storage-delete skipped",
		]);
		expect(first.steps[2]?.note).toMatch(/^pinned: .*409/);
		expect(first.verdicts.find((v) => "ref" in v && v.ref === "legacy_conflict.pem")?.class).toBe("pinned");
		// The file stays and is kept current (never recreated in runtime); the delete is not tried again.
		expect(writes(await cycle(t, want))).toEqual(["storage-replace legacy_conflict.pem"]);
		for (let i = 0; i < 3; i++) expect(writes(await cycle(t, want))).toEqual([]);
		expect(d.count("deleteStorageSSLCertificate")).toBe(1);
		expect(d.count("createStorageSSLCertificate")).toBe(0);
	});

	it("a renewal is pushed hot (storage PUT + runtime set), served, and the next cycle writes nothing", async () => {
		const names = ["renew.test"];
		const v1 = await issueTestLeaf(ca, { names });
		const { h, d, t } = await setup({ "renew.pem": v1.combinedPem });
		const pid = await h.workerPid();
		expect(writes(await cycle(t, [desired("renew", v1, names)]))).toEqual([]);
		const v2 = await issueTestLeaf(ca, { names });
		const before = d.counts();
		const e = await cycle(t, [desired("renew", v2, names)]);
		expect(writes(e)).toEqual(["storage-replace renew.pem", "runtime-set renew.pem"]);
		expect(d.count("replaceStorageSSLCertificate") - (before.replaceStorageSSLCertificate ?? 0)).toBe(1);
		expect(d.count("replaceCert") - (before.replaceCert ?? 0)).toBe(1);
		expect(await served(h, "renew.test")).toBe(normaliseSerial(v2.serial));
		const settled = apiWrites(d);
		expect(writes(await cycle(t, [desired("renew", v2, names)]))).toEqual([]);
		expect(apiWrites(d)).toBe(settled);
		expect(await h.workerPid()).toBe(pid);
	});

	it("master_runtime: a renewal is confirmed by a /runtime/info naming the same worker, not a second observation", async () => {
		const names = ["renew.test"];
		const v1 = await issueTestLeaf(ca, { names });
		const { h, d, t } = await setup({ "renew.pem": v1.combinedPem }, { masterRuntime: true });
		expect(writes(await cycle(t, [desired("renew", v1, names)]))).toEqual([]);
		const v2 = await issueTestLeaf(ca, { names });
		const before = d.counts();
		const delta = (op: string) => d.count(op) - (before[op] ?? 0);
		const e = await cycle(t, [desired("renew", v2, names)]);
		expect(writes(e)).toEqual(["storage-replace renew.pem", "runtime-set renew.pem"]);
		expect(e.steps.map((s) => s.result)).toEqual(["ok", "ok"]);
		// One observation (its listing and its worker), one /runtime/info before the verdict (the worker observed
		// still answers), then one after the writes.
		expect(delta("getAllStorageSSLCertificates")).toBe(1);
		expect(delta("getHaproxyProcessInfo")).toBe(3);
		expect(await served(h, "renew.test")).toBe(normaliseSerial(v2.serial));
		// Without it (the default) the endpoint is observed again in full after its writes.
		const plain = await setup({ "renew.pem": v1.combinedPem });
		await cycle(plain.t, [desired("renew", v1, names)]);
		const was = plain.d.count("getAllStorageSSLCertificates");
		expect(writes(await cycle(plain.t, [desired("renew", v2, names)]))).toEqual([
			"storage-replace renew.pem",
			"runtime-set renew.pem",
		]);
		expect(plain.d.count("getAllStorageSSLCertificates") - was).toBe(2);
	});

	it("a new certificate goes live through the configured crt-list, stays converged, and renews hot", async () => {
		const names = ["fresh.test"];
		const v1 = await issueTestLeaf(ca, { names });
		const { h, d, t } = await setup({}, { crtList: true });
		const pid = await h.workerPid();
		const first = await cycle(t, [desired("fresh", v1, names)]);
		expect(writes(first)).toEqual(["storage-create fresh.pem", "runtime-add fresh.pem"]);
		expect(await served(h, "fresh.test")).toBe(normaliseSerial(v1.serial));
		const settled = apiWrites(d);
		expect(writes(await cycle(t, [desired("fresh", v1, names)]))).toEqual([]);
		expect(apiWrites(d)).toBe(settled);
		const v2 = await issueTestLeaf(ca, { names });
		const renewal = await cycle(t, [desired("fresh", v2, names)]);
		expect(renewal.steps.map((s) => `${s.op} ${s.result}`)).toEqual(["storage-replace ok", "runtime-set ok"]);
		expect(await served(h, "fresh.test")).toBe(normaliseSerial(v2.serial));
		expect(await h.workerPid()).toBe(pid);
	});

	it("the seed in a `crt <dir>/` layout, the directory's entries hidden by the API: duplicate deleted once, never written again, renewal served", async () => {
		const names = ["dirseed.test", "www.dirseed.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		// storage_dir spelled with a trailing slash: the directory's crt-list is still recognised.
		const { h, d, t } = await setupWith(
			{ crtDir: { "dirseed.pem": keeper.combinedPem, "legacy_dirseed.pem": legacy.combinedPem } },
			{ trailingSlash: true },
		);
		const pid = await h.workerPid();
		// What the API really shows: the directory is a crt-list, with no entries (line 0 dropped).
		expect((await d.runtime.showCrtList(h.crtDir))?.length).toBe(2);
		const listed = await fetch(
			`${d.url}/v3/services/haproxy/runtime/ssl_crt_lists/entries?name=${encodeURIComponent(h.crtDir)}`,
			{
				headers: { authorization: `Basic ${Buffer.from(`${d.username}:${d.password}`).toString("base64")}` },
			},
		);
		expect(await listed.json()).toEqual([]);

		let want = [desired("dirseed", keeper, names)];
		const perCycle: string[][] = [];
		for (let i = 0; i < 4; i++) perCycle.push(writes(await cycle(t, want)));
		expect(perCycle).toEqual([
			[
				"crt-list-remove legacy_dirseed.pem",
				"runtime-delete legacy_dirseed.pem",
				"storage-delete legacy_dirseed.pem",
			],
			[],
			[],
			[],
		]);
		const crtListDelete = d.requests.find((r) => r.operation === "deleteCrtListEntry");
		expect(new URLSearchParams(crtListDelete?.query).get("line_number")).toBeNull();
		expect((await d.runtime.showCerts()).names.filter((n) => n.includes("legacy_dirseed"))).toEqual([]);
		expect(existsSync(join(h.crtDir, "legacy_dirseed.pem"))).toBe(false);

		// The keeper's renewal re-inserts its SNI entries: with the duplicate gone, it is served for every name.
		const v2 = await issueTestLeaf(ca, { names });
		want = [desired("dirseed", v2, names)];
		const renewal = await cycle(t, want);
		expect(writes(renewal)).toEqual(["storage-replace dirseed.pem", "runtime-set dirseed.pem"]);
		for (const sni of names) expect(await served(h, sni)).toBe(normaliseSerial(v2.serial));
		expect(writes(await cycle(t, want))).toEqual([]);
		const legacyWrites = d.requests.filter(
			(r) => r.method !== "get" && decodeURIComponent(r.path + r.query).includes("legacy_dirseed"),
		);
		expect(legacyWrites.map((r) => r.operation)).toEqual([
			"deleteCrtListEntry",
			"deleteCert",
			"deleteStorageSSLCertificate",
		]);
		expect(d.count("createStorageSSLCertificate")).toBe(0);
		expect(await h.workerPid()).toBe(pid);
		expect(d.scheduledReloads).toEqual([]);
	});

	it("a dotted legacy name beside its keeper (example.com.pem, addressed as example_com.pem) over 4 cycles: unaddressable, the keeper never deleted or overwritten", async () => {
		const names = ["dotted.test", "www.dotted.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		// The keeper of certificate "dotted.test" is dotted_test.pem; the legacy file was put there by other means.
		const { h, d, t } = await setup({
			"dotted_test.pem": keeper.combinedPem,
			"dotted.test.pem": legacy.combinedPem,
		});
		const pid = await h.workerPid();
		const keeperFile = join(h.crtDir, "dotted_test.pem");
		const legacyFile = join(h.crtDir, "dotted.test.pem");
		let current = keeper;
		const perCycle: string[][] = [];
		for (let i = 0; i < 4; i++) {
			if (i === 2) current = await issueTestLeaf(ca, { names });
			const e = await cycle(t, [desired("dotted.test", current, names)]);
			expect(e.ok).toBe(true);
			perCycle.push(writes(e));
			// The keeper is there after every cycle, holding its own certificate (never the legacy one).
			expect(existsSync(keeperFile)).toBe(true);
			const held = new X509Certificate(await readFile(keeperFile, "utf8"));
			expect(normaliseSerial(held.serialNumber)).toBe(normaliseSerial(current.serial));
			expect(e.verdicts.find((v) => "ref" in v && v.ref === "dotted.test.pem")).toMatchObject({
				class: "unaddressable",
				addressedAs: "dotted_test.pem",
				certificate: "dotted.test",
				why: expect.stringMatching(/Rename the file on disk/),
			});
		}
		// Only the keeper's own renewal (cycle 3) was written; nothing addressed the legacy name.
		expect(perCycle).toEqual([
			[],
			[],
			["storage-replace dotted_test.pem", "runtime-set dotted_test.pem"],
			[],
		]);
		const legacyRequests = d.requests.filter((r) =>
			decodeURIComponent(r.path + r.query).includes("dotted.test.pem"),
		);
		expect(legacyRequests.map((r) => r.operation).filter((op) => op !== "getCert")).toEqual([]);
		// Storage GETs only ever asked for the keeper: one per full observation (the first, and the look after the
		// writes of cycle 3, full through a worker's stats socket); the others reuse what the last one read.
		const storageGets = d.requests.filter((r) => r.operation === "getOneStorageSSLCertificate");
		expect(storageGets.map((r) => decodeURIComponent(r.path).split("/").at(-1))).toEqual(
			Array(2).fill("dotted_test.pem"),
		);
		expect(
			d.count("deleteStorageSSLCertificate") + d.count("deleteCert") + d.count("deleteCrtListEntry"),
		).toBe(0);
		expect(existsSync(legacyFile)).toBe(true);
		expect(await readFile(legacyFile, "utf8")).toBe(legacy.combinedPem);
		expect(await h.workerPid()).toBe(pid);
		expect(d.scheduledReloads).toEqual([]);
	});

	it.each([
		["with a probe", true],
		["without a probe", false],
	] as const)(
		"a name another certificate serves is never converged, every cycle (%s): the dotted legacy file beside its keeper",
		async (_title, probed) => {
			const names = ["dotted.test", "www.dotted.test"];
			const keeper = await issueTestLeaf(ca, { names });
			const legacy = await issueTestLeaf(ca, { names });
			// HAProxy loads its crt directory in name order: dotted.test.pem ('.' < '_') serves both names.
			const h = await r.haproxy({
				crtDir: { "dotted_test.pem": keeper.combinedPem, "dotted.test.pem": legacy.combinedPem },
			});
			const d = await r.dpapi(h);
			const endpoint = { name: "fra1", url: d.url, username: d.username, password: d.password };
			const t = r.dataplane(h, d, { endpoints: [probed ? { ...endpoint, probe: h.address } : endpoint] });
			const report = (target: TargetReport, mode: "plan" | "sync"): CycleReport => ({
				mode,
				startedAt: new Date().toISOString(),
				durationMs: 0,
				certificates: [],
				sourceProblems: [],
				targets: [target],
			});
			let current = keeper;
			for (let i = 0; i < 4; i++) {
				// Cycle 2 renews the keeper: its runtime update puts its SNI entries behind the legacy file's again.
				if (i === 1) current = await issueTestLeaf(ca, { names });
				const want = [desired("dotted.test", current, names)];
				for (const mode of ["plan", "sync"] as const) {
					const target = await t.run(want, mode, new AbortController().signal);
					const e = target.endpoints[0] as EndpointReport;
					const at = `cycle ${i + 1} ${mode}`;
					expect(e.ok, at).toBe(true);
					expect(endpointState(e), at).toMatchObject({
						state: "failed",
						reason: expect.stringMatching(
							/^SNI_SHADOWED: dotted\.test: .*HAProxy (may )?serves? dotted\.test\.pem/,
						),
					});
					expect(certificateOnEndpoint(e, "dotted.test"), at).toMatchObject({
						state: "failed",
						converged: false,
						reason: expect.stringMatching(/^shadowed: /),
					});
					const cycle = report(target, mode);
					const outcome = cycleOutcome(cycle);
					expect(outcome.converged, at).toBe(false);
					expect(
						outcome.failures.map((f) => `${f.kind} ${f.subject}`),
						at,
					).toEqual(["shadowed fra/fra1 dotted.test", "shadowed fra/fra1 www.dotted.test"]);
					// What to do, named: the file to rename.
					expect(outcome.failures[0]?.hint, at).toMatch(/^rename dotted\.test\.pem on disk/);
					if (!probed) expect(outcome.failures[0]?.hint, at).toMatch(/configure `probe` on the endpoint/);
					expect(cycleExitCode(outcome, mode), at).toBe(1);
					const status = statusSummary(cycle);
					expect(
						status.endpoints.map((x) => x.state),
						at,
					).toEqual(["failed"]);
				}
			}
			// The legacy file serves the names all along: what every view above said.
			for (const sni of names) expect(await served(h, sni)).toBe(normaliseSerial(legacy.serial));
			expect(d.scheduledReloads).toEqual([]);
		},
	);

	it("a ~17 KiB certificate through the API: its runtime write is never sent, reported pending a reload with its size; HAProxy alive, same worker, the others converge", async () => {
		const small1 = await issueTestLeaf(ca, { names: ["small.test"] });
		const big1 = await issueTestLeaf(ca, { names: ["big.test"] });
		const { h, d, t } = await setup(
			{ "small.pem": small1.combinedPem, "big.pem": big1.combinedPem },
			{ crtList: true },
		);
		const pid = await h.workerPid();
		const small2 = await issueTestLeaf(ca, { names: ["small.test"] });
		const big2 = await bigLeaf();
		const chain = await longChainLeaf("chain.test");
		const want = [
			desired("small", small2, ["small.test"]),
			desired("big", big2.leaf, big2.names),
			desired("chain", chain, ["chain.test"]),
		];
		const outcome = (e: EndpointReport) =>
			e.steps.map((s) => `${s.op} ${s.ref} ${s.result}${s.error ? ` ${s.error.code}` : ""}`);

		const first = await cycle(t, want);
		expect(outcome(first)).toEqual([
			"storage-replace small.pem ok",
			"runtime-set small.pem ok",
			"storage-replace big.pem ok",
			"runtime-set big.pem failed RUNTIME_PAYLOAD_TOO_LARGE",
			"storage-create chain.pem ok",
			"runtime-add chain.pem failed RUNTIME_PAYLOAD_TOO_LARGE",
		]);
		for (const step of first.steps.filter((s) => s.result === "failed")) {
			const bytes = Number(/request of (\d+) bytes/.exec(step.error?.message ?? "")?.[1]);
			expect(bytes).toBeGreaterThan(16_384);
			expect(bytes).toBeLessThan(20_000);
			expect(step.note).toMatch(/^pending a reload/);
			expect(step.error?.message).not.toMatch(/BEGIN|PRIVATE/);
		}
		// Nothing reached HAProxy at or over tune.bufsize: only the small certificate's runtime write was sent.
		expect(d.overflows).toEqual([]);
		expect(d.count("replaceCert")).toBe(1);
		expect(d.count("createCert")).toBe(0);
		expect(h.alive()).toBe(true);
		expect(await h.workerPid()).toBe(pid);
		expect(await served(h, "small.test")).toBe(normaliseSerial(small2.serial));
		expect(await served(h, "big.test")).toBe(normaliseSerial(big1.serial));
		// The storage files hold the new certificates, for the next reload.
		expect(
			normaliseSerial(new X509Certificate(await readFile(join(h.crtDir, "big.pem"), "utf8")).serialNumber),
		).toBe(normaliseSerial(big2.leaf.serial));

		// Reported again every cycle, still never sent; no other write.
		const settled = apiWrites(d);
		expect(outcome(await cycle(t, want))).toEqual([
			"runtime-set big.pem failed RUNTIME_PAYLOAD_TOO_LARGE",
			"runtime-add chain.pem failed RUNTIME_PAYLOAD_TOO_LARGE",
		]);
		expect(apiWrites(d)).toBe(settled);

		// The reload it waits for: every certificate served from its file, nothing left to do.
		await h.reload();
		const after = await cycle(t, want);
		expect(outcome(after)).toEqual([]);
		expect(after.served.every((s) => s.match)).toBe(true);
		expect(await served(h, bigName(99))).toBe(normaliseSerial(big2.leaf.serial));
		expect(await served(h, "chain.test")).toBe(normaliseSerial(chain.serial));
		expect(d.overflows).toEqual([]);
		// The reload-safety invariant runs after the test (rig): once, as each of its 388 probes costs an RSA handshake.
	});

	it("the double answers a runtime write over tune.bufsize as the server would (500, recorded, never sent): a guard set too high is caught", async () => {
		const big1 = await issueTestLeaf(ca, { names: ["big.test"] });
		// The target believes HAProxy's bufsize is 64 KiB; HAProxy (and the double) use 16 KiB.
		const { h, d, t } = await setup({ "big.pem": big1.combinedPem }, { bufsize: 65_536 });
		const pid = await h.workerPid();
		const big2 = await bigLeaf();
		const e = await cycle(t, [desired("big", big2.leaf, big2.names)]);
		expect(e.steps.map((s) => `${s.op} ${s.result} ${s.error?.code ?? ""}`)).toEqual([
			"storage-replace ok ",
			"runtime-set failed ENDPOINT_ERROR",
		]);
		expect(d.overflows).toEqual([
			{
				operation: "replaceCert",
				name: join(h.crtDir, "big.pem"),
				bytes: expect.any(Number),
				effect: "connection closed",
			},
		]);
		expect(d.overflows[0]?.bytes).toBeGreaterThan(16_384);
		expect(h.alive()).toBe(true);
		expect(await h.workerPid()).toBe(pid);
		// The renewal waits for a reload by design (the runtime write was refused): its names change at the reload.
		await assertReloadSafe(h, { except: big2.names });
	});
});

let big: { leaf: TestLeaf; names: string[] } | undefined;
const bigName = (i: number) => `n${i}.${"x".repeat(40)}.big.test`;
/** An RSA leaf with 191 SANs (long ones: fewer names to probe) and one intermediate: about 17 KiB as one PEM. */
async function bigLeaf(): Promise<{ leaf: TestLeaf; names: string[] }> {
	if (big) return big;
	const intermediate = await createTestCa("big intermediate", { issuer: ca });
	const names = ["big.test", ...Array.from({ length: 190 }, (_, i) => bigName(i))];
	const leaf = await issueTestLeaf(ca, { names, keyType: "rsa-2048", intermediates: [intermediate] });
	const size = Buffer.byteLength(leaf.combinedPem);
	expect(size).toBeGreaterThan(16_500);
	expect(size).toBeLessThan(18_500);
	big = { leaf, names };
	return big;
}

/** One name, a long chain of valid intermediates: over 16 KiB. */
async function longChainLeaf(name: string): Promise<TestLeaf> {
	const intermediates: TestIssuer[] = [];
	let issuer = ca;
	for (let i = 0; i < 16; i++) {
		issuer = await createTestCa(`deep intermediate ${i} ${"x".repeat(200)}`, { issuer });
		intermediates.unshift(issuer);
	}
	const leaf = await issueTestLeaf(ca, { names: [name], intermediates });
	expect(Buffer.byteLength(leaf.combinedPem)).toBeGreaterThan(16_384);
	return leaf;
}
