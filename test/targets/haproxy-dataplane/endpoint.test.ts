import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../../src/certificates/bundle.js";
import type { Bundle } from "../../../src/certificates/types.js";
import type { EndpointObservation, ObservedRef } from "../../../src/targets/haproxy/engine/model.js";
import {
	createDataplaneEndpoint,
	type DataplaneEndpoint,
	dataplaneEndpointSchema,
} from "../../../src/targets/haproxy-dataplane/index.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { type DpapiDouble, startDpapiDouble } from "../../harness/dpapi-double/index.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { assertReloadSafe } from "../../harness/invariant.js";

const signal = () => AbortSignal.timeout(20_000);
// Test certificates are made with the real clock, so the driver gets it too.
const now = () => new Date();

let ca: TestIssuer;
let h: Haproxy;
let double: DpapiDouble;
let driver: DataplaneEndpoint;
const drivers: DataplaneEndpoint[] = [];
const doubles: DpapiDouble[] = [];
const warnings: string[] = [];
/** Names the current test deliberately leaves to a reload (a lone action, as no cycle would send). */
let leftToReload: string[] = [];

async function bundleFor(names: string[]): Promise<Bundle> {
	const leaf = await issueTestLeaf(ca, { names });
	return parseBundle({ combined: leaf.combinedPem }, { source: `test ${names[0]}` });
}

function endpointFor(d: DpapiDouble, extra: Record<string, unknown> = {}): DataplaneEndpoint {
	const e = createDataplaneEndpoint(
		dataplaneEndpointSchema.parse({
			name: "haproxy-fra1",
			url: d.url,
			username: d.username,
			password: d.password,
			probe: h.address,
			...extra,
		}),
		{
			now,
			warn: (_f, m) => warnings.push(m),
			sleep: async () => {},
			random: () => 0.5,
			storageDir: h.crtDir,
		},
	);
	drivers.push(e);
	return e;
}

function refs(o: EndpointObservation): ObservedRef[] {
	if (!o.ok) throw o.error;
	return o.refs;
}

function writesSince(before: Record<string, number>): Record<string, number> {
	const out: Record<string, number> = {};
	for (const [op, n] of Object.entries(double.counts())) {
		const delta = n - (before[op] ?? 0);
		if (delta > 0 && !/^get/.test(op)) out[op] = delta;
	}
	return out;
}

beforeAll(async () => {
	ca = await createTestCa("dataplane endpoint test");
	const files: Record<string, string> = {};
	for (const n of ["a", "b", "legacy_b", "stale"]) {
		files[`${n}.pem`] = (
			await issueTestLeaf(ca, { names: [`${n.replace("legacy_", "")}.test`] })
		).combinedPem;
	}
	h = await startHaproxy({ crtDir: files });
	double = await startDpapiDouble({ haproxy: h });
	doubles.push(double);
	driver = endpointFor(double);
});

afterEach(async () => {
	for (const d of doubles) {
		d.clearFaults();
		d.assertSpecClean();
	}
	await assertReloadSafe(h, { except: leftToReload.splice(0) });
});

afterAll(async () => {
	for (const d of drivers) await d.close();
	for (const d of doubles) await d.close();
	await h?.stop();
});

describe("targets/haproxy-dataplane endpoint", () => {
	it("observes storage and runtime joined per ref, with normalised serials and crt-lists", async () => {
		const before = double.counts();
		const o = await driver.observe(signal());
		expect(o.ok && o.info?.api_version).toMatch(/^v3/);
		const a = refs(o).find((r) => r.ref === "a.pem");
		expect(a?.runtimeName).toBe(join(h.crtDir, "a.pem"));
		expect(a?.storage?.serial).toBeDefined();
		// Storage says decimal, runtime hex: both normalised to the same uppercase hex.
		expect(a?.storage?.serial).toBe(a?.runtime?.serial);
		expect(a?.runtime?.sha1).toMatch(/^[0-9A-F]{40}$/);
		expect(a?.runtime?.status).toBe("Used");
		expect(a?.storage?.names).toEqual(["a.test"]);
		expect(a?.runtime?.names).toEqual(["a.test"]);
		expect(a?.crtLists).toEqual([h.crtDir]);
		// The bind's default certificate lives outside storage: a runtime-only ref.
		const other = refs(o)
			.filter((r) => r.storage === undefined)
			.map((r) => r.runtimeName);
		expect(other).toEqual([join(h.dir, "default.pem")]);
		// One list and one GET per item; nothing written.
		const seen = double.counts();
		expect(seen.getAllStorageSSLCertificates! - (before.getAllStorageSSLCertificates ?? 0)).toBe(1);
		expect(seen.getOneStorageSSLCertificate! - (before.getOneStorageSSLCertificate ?? 0)).toBe(4);
		expect(seen.getCert! - (before.getCert ?? 0)).toBe(5);
		expect(writesSince(before)).toEqual({});
	});

	it("hot-swaps a certificate (storage PUT + runtime set) with no reload, and the probe sees it", async () => {
		const worker = await h.worker();
		const bundle = await bundleFor(["a.test"]);
		const runtimeName = join(h.crtDir, "a.pem");
		const before = double.counts();
		const results = [
			await driver.apply({ op: "storage-replace", ref: "a.pem", certificate: "a", bundle }, signal()),
			await driver.apply(
				{ op: "runtime-set", ref: "a.pem", runtimeName, certificate: "a", bundle },
				signal(),
			),
		];
		expect(results.map((r) => [r.ok, r.reloadCaused, r.error])).toEqual([
			[true, undefined, undefined],
			[true, undefined, undefined],
		]);
		expect(writesSince(before)).toEqual({ replaceStorageSSLCertificate: 1, replaceCert: 1 });
		const served = await driver.probe!("a.test", signal());
		expect(served.serial).toBe(bundle.leaf.serial);
		expect(served.fingerprint).toBe(bundle.leaf.fingerprint);
		const after = await h.worker();
		expect(after.pid).toBe(worker.pid);
		expect(after.uptimeSec).toBeGreaterThanOrEqual(worker.uptimeSec);
		expect(double.scheduledReloads).toEqual([]);
	});

	it("reproduces the seed's staleness: a storage delete leaves the runtime ref until a reload", async () => {
		const del = await driver.apply({ op: "storage-delete", ref: "stale.pem" }, signal());
		expect(del).toMatchObject({ ok: true });
		expect(del.reloadCaused).toBeUndefined();

		const after = refs(await driver.observe(signal())).find((r) => r.ref === "stale.pem");
		expect(after?.storage).toBeUndefined();
		expect(after?.runtime?.status).toBe("Used");
		expect(after?.runtimeName).toBe(join(h.crtDir, "stale.pem"));

		// HAProxy refuses to drop a certificate its crt directory uses: a 500, reported as a value.
		const rt = await driver.apply(
			{ op: "runtime-delete", ref: "stale.pem", runtimeName: join(h.crtDir, "stale.pem") },
			signal(),
		);
		expect(rt.ok).toBe(false);
		expect(rt.error?.code).toBe("RUNTIME_CERT_IN_USE");
		expect(rt.error?.context.status).toBe(500);
		expect(rt.error?.message).toMatch(/in use/);

		// Deleting again is harmless: 404 means already gone.
		const again = await driver.apply({ op: "storage-delete", ref: "stale.pem" }, signal());
		expect(again).toMatchObject({ ok: true, note: "storage delete answered 404: already gone" });

		await h.reload();
		const reloaded = refs(await driver.observe(signal()));
		expect(reloaded.map((r) => r.ref)).not.toContain("stale.pem");
	});

	it("removes a legacy duplicate without reload: crt-list entry, runtime cert, storage file", async () => {
		const runtimeName = join(h.crtDir, "legacy_b.pem");
		const pid = await h.workerPid();
		const results = [
			await driver.apply(
				{ op: "crt-list-remove", ref: "legacy_b.pem", runtimeName, crtList: h.crtDir },
				signal(),
			),
			await driver.apply({ op: "runtime-delete", ref: "legacy_b.pem", runtimeName }, signal()),
			await driver.apply({ op: "storage-delete", ref: "legacy_b.pem" }, signal()),
		];
		expect(results.map((r) => r.ok)).toEqual([true, true, true]);
		expect(refs(await driver.observe(signal())).map((r) => r.ref)).not.toContain("legacy_b.pem");
		expect(await h.workerPid()).toBe(pid);
		const again = await driver.apply(
			{ op: "crt-list-remove", ref: "legacy_b.pem", runtimeName, crtList: h.crtDir },
			signal(),
		);
		expect(again).toMatchObject({ ok: true, note: "crt-list entry already gone" });
	});

	it("makes a new certificate live through a crt-list (runtime create + add), then retires it", async () => {
		const bundle = await bundleFor(["new.test"]);
		const runtimeName = join(h.crtDir, "new.pem");
		const created = await driver.apply(
			{ op: "storage-create", ref: "new.pem", certificate: "new", bundle },
			signal(),
		);
		expect(created).toMatchObject({ ok: true });
		const added = await driver.apply(
			{ op: "runtime-add", ref: "new.pem", runtimeName, crtList: h.crtListPath, certificate: "new", bundle },
			signal(),
		);
		expect(added.ok).toBe(true);
		expect(added.note).toMatch(/HAProxy knows it as new\.pem/);
		expect((await driver.probe!("new.test", signal())).serial).toBe(bundle.leaf.serial);

		const removed = [
			await driver.apply(
				{ op: "crt-list-remove", ref: "new.pem", runtimeName: "new.pem", crtList: h.crtListPath },
				signal(),
			),
			await driver.apply({ op: "runtime-delete", ref: "new.pem", runtimeName: "new.pem" }, signal()),
		];
		expect(removed.map((r) => r.ok)).toEqual([true, true]);
		expect((await driver.probe!("new.test", signal())).names).toEqual(["default.invalid"]);
		// Retired from runtime only: new.pem stays in the crt directory, so a reload serves it again.
		leftToReload = ["new.test"];
	});

	it("refuses an expired certificate before sending anything", async () => {
		const leaf = await issueTestLeaf(ca, {
			names: ["a.test"],
			notBefore: new Date(Date.now() - 20 * 86_400_000),
			notAfter: new Date(Date.now() - 86_400_000),
		});
		const bundle = parseBundle({ combined: leaf.combinedPem }, { source: "expired" });
		const before = double.counts();
		const r = await driver.apply({ op: "storage-replace", ref: "a.pem", certificate: "a", bundle }, signal());
		expect(r.ok).toBe(false);
		expect(r.error?.code).toBe("BUNDLE_EXPIRED");
		expect(double.counts()).toEqual(before);
	});

	it("refuses a runtime update that would stop serving a name, unless allowed", async () => {
		const runtimeName = join(h.crtDir, "b.pem");
		const narrower = await bundleFor(["other.test"]);
		const before = double.count("replaceCert");
		const r = await driver.apply(
			{ op: "runtime-set", ref: "b.pem", runtimeName, certificate: "b", bundle: narrower },
			signal(),
		);
		expect(r.ok).toBe(false);
		expect(r.error?.code).toBe("UPDATE_DROPS_NAMES");
		expect(r.error?.message).toContain("b.test");
		expect(double.count("replaceCert")).toBe(before);

		const permissive = createDataplaneEndpoint(
			dataplaneEndpointSchema.parse({
				name: "lenient",
				url: double.url,
				username: double.username,
				password: double.password,
			}),
			{ now, allowNameRemoval: true },
		);
		drivers.push(permissive);
		// A runtime-set alone (no storage-replace): b.pem on disk keeps b.test until a reload.
		leftToReload = ["b.test", "other.test"];
		const allowed = await permissive.apply(
			{ op: "runtime-set", ref: "b.pem", runtimeName, certificate: "b", bundle: narrower },
			signal(),
		);
		expect(allowed.ok).toBe(true);
	});

	it("notes the name the server really stored under", async () => {
		const bundle = await bundleFor(["dots.test"]);
		const r = await driver.apply(
			{ op: "storage-create", ref: "dots.test.pem", certificate: "dots", bundle },
			signal(),
		);
		expect(r).toMatchObject({ ok: true, note: "the server stored it as dots_test.pem" });
		// A storage-create alone (no runtime-add): the crt directory's new file goes live at the next reload.
		leftToReload = ["dots.test"];
	});

	it("reports endpoint errors as values: a missing file, an auth failure while observing", async () => {
		const bundle = await bundleFor(["x.test"]);
		const missing = await driver.apply(
			{ op: "storage-replace", ref: "missing.pem", certificate: "x", bundle },
			signal(),
		);
		expect(missing.ok).toBe(false);
		expect(missing.error?.code).toBe("ENDPOINT_NOT_FOUND");

		double.inject({ kind: "status401", operation: "getAllCerts" });
		const o = await driver.observe(signal());
		expect(o.ok).toBe(false);
		if (!o.ok) expect(o.error.code).toBe("ENDPOINT_AUTH");
	});

	it("records a 202 + Reload-ID as a reload caused, with a warning", async () => {
		const old = await startDpapiDouble({ haproxy: h, ignoreSkipReload: true });
		doubles.push(old);
		const e = endpointFor(old);
		const bundle = await bundleFor(["r.test"]);
		expect(
			await e.apply({ op: "storage-create", ref: "r.pem", certificate: "r", bundle }, signal()),
		).toMatchObject({
			ok: true,
		});
		warnings.length = 0;
		const r = await e.apply({ op: "storage-delete", ref: "r.pem" }, signal());
		expect(r.ok).toBe(true);
		expect(r.reloadCaused?.reloadId).toBe(old.scheduledReloads[0]);
		expect(r.reloadCaused?.reason).toMatch(/202/);
		expect(warnings).toEqual([expect.stringMatching(/^reload caused/)]);
	});

	it("is refused a storage delete of a file haproxy.cfg names (409)", async () => {
		const pinnedPem = (await issueTestLeaf(ca, { names: ["pinned.test"] })).combinedPem;
		const p = await startHaproxy({ pinned: { "pinned.pem": pinnedPem } });
		try {
			const pinnedDouble = await startDpapiDouble({ haproxy: p, storageDir: p.pinnedDir });
			doubles.push(pinnedDouble);
			const e = endpointFor(pinnedDouble);
			const r = await e.apply({ op: "storage-delete", ref: "pinned.pem" }, signal());
			expect(r.ok).toBe(false);
			expect(r.error?.code).toBe("ENDPOINT_CONFLICT");
			expect(r.error?.message).toMatch(/referenced in haproxy conf/);
		} finally {
			await p.stop();
		}
	});

	it("bounds the GETs in flight while observing", async () => {
		const narrow = createDataplaneEndpoint(
			dataplaneEndpointSchema.parse({
				name: "narrow",
				url: double.url,
				username: double.username,
				password: double.password,
			}),
			{ now, concurrency: 2 },
		);
		drivers.push(narrow);
		for (const operation of ["getOneStorageSSLCertificate", "getCert"]) {
			double.inject({ kind: "latency", ms: 40, operation });
		}
		const start = double.requests.length;
		expect((await narrow.observe(signal())).ok).toBe(true);
		const gets = double.requests
			.slice(start)
			.filter((r) => r.operation === "getOneStorageSSLCertificate" || r.operation === "getCert");
		const overlap = (t: number) => gets.filter((r) => r.startedAt <= t && (r.endedAt ?? 0) > t).length;
		const most = Math.max(...gets.map((r) => overlap(r.startedAt)));
		expect(gets.length).toBeGreaterThan(4);
		expect(most).toBeLessThanOrEqual(2);
		expect(most).toBe(2);
	});

	it("has no probe when none is configured", () => {
		const e = endpointFor(double, { probe: undefined });
		expect(e.probe).toBeUndefined();
	});
});
