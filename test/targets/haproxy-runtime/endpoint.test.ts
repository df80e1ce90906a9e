import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Bundle, parseBundle } from "../../../src/certificates/index.js";
import type { HaproxyAction, ObservedRef } from "../../../src/targets/haproxy/engine/model.js";
import {
	createRuntimeEndpoint,
	type RuntimeEndpoint,
	runtimeTargetSchema,
} from "../../../src/targets/haproxy-runtime/index.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { assertReloadSafe } from "../../harness/invariant.js";

const signal = new AbortController().signal;
/** Names the current test deliberately leaves to a reload (a lone runtime action, as no cycle would send). */
let leftToReload: string[] = [];
const DAY = 86_400_000;

async function bundleOf(ca: TestIssuer, names: string[], extra: { serial?: string; notAfter?: Date } = {}) {
	const leaf = await issueTestLeaf(ca, { names, ...extra });
	return { leaf, bundle: parseBundle({ combined: leaf.combinedPem }, { source: "test" }) };
}

function endpoint(h: Haproxy, extra: Record<string, unknown> = {}): RuntimeEndpoint {
	return createRuntimeEndpoint(
		runtimeTargetSchema.parse({
			name: "lb-test",
			type: "haproxy-runtime",
			socket: h.adminSocket,
			crt_dir: h.crtDir,
			probe: h.address,
			...extra,
		}),
	);
}

async function refsOf(driver: RuntimeEndpoint): Promise<Map<string, ObservedRef>> {
	const o = await driver.observe(signal);
	if (!o.ok) throw o.error;
	return new Map(o.refs.map((r) => [r.ref, r]));
}

function set(ref: string, h: Haproxy, bundle: Bundle): HaproxyAction {
	return { op: "runtime-set", ref, runtimeName: join(h.crtDir, ref), certificate: ref, bundle };
}

describe("targets/haproxy-runtime endpoint driver against a real HAProxy", () => {
	let ca: TestIssuer;
	let h: Haproxy;
	let driver: RuntimeEndpoint;

	beforeAll(async () => {
		ca = await createTestCa("endpoint test root");
		const [a, b, keeper, legacy] = await Promise.all([
			issueTestLeaf(ca, { names: ["a.test"], serial: "3A01" }),
			issueTestLeaf(ca, { names: ["b.test", "www.b.test"], serial: "3B01" }),
			issueTestLeaf(ca, { names: ["bars.test", "www.bars.test"], serial: "3C01" }),
			issueTestLeaf(ca, { names: ["bars.test", "www.bars.test"], serial: "3C00" }),
		]);
		h = await startHaproxy({
			crtDir: {
				"a.pem": a.combinedPem,
				"b.pem": b.combinedPem,
				"barsone.pem": keeper.combinedPem,
				"legacy_barsone.pem": legacy.combinedPem,
			},
		});
		driver = endpoint(h);
	});
	afterEach(async () => {
		await assertReloadSafe(h, { except: leftToReload.splice(0) });
	});
	afterAll(async () => {
		await driver?.close();
		await h?.stop();
	});

	it("observes files and runtime side by side, with crt-list membership", async () => {
		const o = await driver.observe(signal);
		expect(o.ok).toBe(true);
		if (!o.ok) return;
		expect(o.info?.pid).toBe(String(await h.workerPid()));
		const a = o.refs.find((r) => r.ref === "a.pem");
		expect(a).toMatchObject({
			runtimeName: join(h.crtDir, "a.pem"),
			storage: { serial: "3A01", names: ["a.test"] },
			runtime: { serial: "3A01", status: "Used", names: ["a.test"] },
			crtLists: [h.crtDir],
		});
		expect(a?.storage?.sha1).toBe(a?.runtime?.sha1);
		expect(a?.storage?.fingerprint).toMatch(/^[0-9A-F]{64}$/);
		expect(o.refs.filter((r) => r.external === undefined).map((r) => r.ref)).toEqual([
			"a.pem",
			"b.pem",
			"barsone.pem",
			"legacy_barsone.pem",
		]);
		// The bind's default certificate, loaded from outside crt_dir: observed (who serves what), never written.
		const outside = o.refs.filter((r) => r.external !== undefined);
		expect(outside.map((r) => r.ref)).toEqual([join(h.dir, "default.pem")]);
		expect(outside[0]?.storage).toBeUndefined();
	});

	it("hot swap: storage-replace + runtime-set, probe sees the new serial, no reload, file 0600, no temp left", async () => {
		const before = await h.worker();
		const { bundle } = await bundleOf(ca, ["a.test"], { serial: "3A02" });
		const results = [
			await driver.apply({ op: "storage-replace", ref: "a.pem", certificate: "a", bundle }, signal),
			await driver.apply(set("a.pem", h, bundle), signal),
		];
		expect(results.map((r) => [r.ok, r.error?.code])).toEqual([
			[true, undefined],
			[true, undefined],
		]);
		expect((await driver.probe?.("a.test", signal))?.serial).toBe("3A02");
		const refs = await refsOf(driver);
		expect(refs.get("a.pem")?.storage?.serial).toBe("3A02");
		expect(refs.get("a.pem")?.runtime?.serial).toBe("3A02");
		expect((await stat(join(h.crtDir, "a.pem"))).mode & 0o777).toBe(0o600);
		expect((await readdir(h.crtDir)).filter((f) => f.startsWith("."))).toEqual([]);
		const after = await h.worker();
		expect(after.pid).toBe(before.pid);
		expect(after.uptimeSec).toBeGreaterThanOrEqual(before.uptimeSec);
	});

	it("refuses before sending: a certificate dropping a served name, an expired one; allows removal when configured", async () => {
		const narrower = await bundleOf(ca, ["b.test"], { serial: "3B02" });
		const dropped = await driver.apply(set("b.pem", h, narrower.bundle), signal);
		expect(dropped.ok).toBe(false);
		expect(dropped.error?.code).toBe("UPDATE_DROPS_NAMES");
		expect(dropped.error?.message).toContain("www.b.test");

		const expired = await bundleOf(ca, ["b.test", "www.b.test"], {
			serial: "3B03",
			notAfter: new Date(Date.now() - DAY),
		});
		const refused = await driver.apply(set("b.pem", h, expired.bundle), signal);
		expect(refused.error?.code).toBe("BUNDLE_EXPIRED");
		expect((await driver.probe?.("www.b.test", signal))?.serial).toBe("3B01");

		// A runtime-set alone (no storage-replace): b.pem on disk keeps 3B01 until a reload.
		leftToReload = ["b.test", "www.b.test"];
		const permissive = endpoint(h, { allow_name_removal: true });
		try {
			const allowed = await permissive.apply(set("b.pem", h, narrower.bundle), signal);
			expect(allowed.ok).toBe(true);
			expect((await permissive.probe?.("b.test", signal))?.serial).toBe("3B02");
			// HAProxy recomputed the SNI names: www.b.test now gets the default certificate.
			expect((await permissive.probe?.("www.b.test", signal))?.names).toEqual(["default.invalid"]);
		} finally {
			await permissive.close();
		}
	});

	it("refuses a payload of tune.bufsize or more without sending; HAProxy stays up and serving", async () => {
		const intermediates: TestIssuer[] = [];
		let issuer = ca;
		// A long chain of valid intermediates: the whole request is over 16 KiB.
		for (let i = 0; i < 16; i++) {
			issuer = await createTestCa(`deep intermediate ${i} ${"x".repeat(200)}`, { issuer });
			intermediates.unshift(issuer);
		}
		const leaf = await issueTestLeaf(ca, { names: ["a.test"], intermediates });
		const bundle = parseBundle({ combined: leaf.combinedPem }, { source: "big" });
		expect(Buffer.byteLength(leaf.combinedPem)).toBeGreaterThan(16_384);
		const r = await driver.apply(set("a.pem", h, bundle), signal);
		expect(r.error?.code).toBe("RUNTIME_PAYLOAD_TOO_LARGE");
		expect(r.note).toMatch(/not hot-updatable/);
		expect(h.alive()).toBe(true);
		expect((await driver.probe?.("a.test", signal))?.serial).toBe("3A02");
	});

	it("duplicate SNI: writing the keeper serves the duplicate; removing the duplicate without reload serves the keeper", async () => {
		const pid = await h.workerPid();
		expect((await driver.probe?.("bars.test", signal))?.serial).toBe("3C01");
		const { bundle } = await bundleOf(ca, ["bars.test", "www.bars.test"], { serial: "3C02" });
		// A runtime-set alone (no storage-replace): barsone.pem on disk keeps 3C01 until a reload.
		leftToReload = ["bars.test", "www.bars.test"];
		const write = await driver.apply(set("barsone.pem", h, bundle), signal);
		expect(write.ok).toBe(true);
		// The hazard: the commit re-inserted the keeper's SNI entries behind the duplicate's.
		expect((await driver.probe?.("bars.test", signal))?.serial).toBe("3C00");

		const legacy = join(h.crtDir, "legacy_barsone.pem");
		const inUse = await driver.apply(
			{ op: "runtime-delete", ref: "legacy_barsone.pem", runtimeName: legacy },
			signal,
		);
		expect(inUse.ok).toBe(false);
		expect(inUse.error?.code).toBe("RUNTIME_CERT_IN_USE");
		expect(inUse.error?.message).toMatch(/in use/);

		const steps: HaproxyAction[] = [
			{ op: "crt-list-remove", ref: "legacy_barsone.pem", runtimeName: legacy, crtList: h.crtDir },
			{ op: "runtime-delete", ref: "legacy_barsone.pem", runtimeName: legacy },
			{ op: "storage-delete", ref: "legacy_barsone.pem" },
		];
		for (const step of steps) expect((await driver.apply(step, signal)).ok).toBe(true);
		expect((await driver.probe?.("bars.test", signal))?.serial).toBe("3C02");
		expect((await driver.probe?.("www.bars.test", signal))?.serial).toBe("3C02");
		expect((await refsOf(driver)).has("legacy_barsone.pem")).toBe(false);
		// Idempotent: repeating the removal is a no-op with a note.
		const again = await Promise.all(steps.map((s) => driver.apply(s, signal)));
		expect(again.map((r) => [r.ok, Boolean(r.note)])).toEqual([
			[true, true],
			[true, true],
			[true, true],
		]);
		expect(await h.workerPid()).toBe(pid);
	});

	it("adds a new certificate live into the crt directory (no crt_list configured)", async () => {
		const { bundle } = await bundleOf(ca, ["new.test"], { serial: "3D01" });
		const actions: HaproxyAction[] = [
			{ op: "storage-create", ref: "new.pem", certificate: "new", bundle },
			{
				op: "runtime-add",
				ref: "new.pem",
				runtimeName: join(h.crtDir, "new.pem"),
				crtList: "",
				certificate: "new",
				bundle,
			},
		];
		for (const a of actions) expect(await driver.apply(a, signal)).toMatchObject({ ok: true });
		expect((await driver.probe?.("new.test", signal))?.serial).toBe("3D01");
		const ref = (await refsOf(driver)).get("new.pem");
		expect(ref).toMatchObject({ storage: { serial: "3D01" }, runtime: { serial: "3D01", status: "Used" } });
		expect(ref?.crtLists).toEqual([h.crtDir]);
	});

	it("staleness: after a storage delete the runtime still lists the ref until a deliberate reload", async () => {
		const pid = await h.workerPid();
		const deleted = await driver.apply({ op: "storage-delete", ref: "b.pem" }, signal);
		expect(deleted.ok).toBe(true);
		const stale = (await refsOf(driver)).get("b.pem");
		expect(stale?.storage).toBeUndefined();
		expect(stale?.runtime?.status).toBe("Used");
		const refused = await driver.apply(
			{ op: "runtime-delete", ref: "b.pem", runtimeName: join(h.crtDir, "b.pem") },
			signal,
		);
		expect(refused.ok).toBe(false);
		expect(refused.error?.code).toBe("RUNTIME_CERT_IN_USE");
		expect(refused.error?.message).toMatch(/in use/);
		expect(await h.workerPid()).toBe(pid);

		await h.reload();
		const refs = await refsOf(driver);
		expect(refs.has("b.pem")).toBe(false);
		// What was written to disk (the hot swap, the new certificate) is what the new worker loaded.
		expect(refs.get("new.pem")?.runtime?.serial).toBe("3D01");
		expect(refs.get("a.pem")?.runtime?.serial).toBe("3A02");
	});
});

describe("targets/haproxy-runtime endpoint: crt_list and pending reloads", () => {
	let ca: TestIssuer;
	let h: Haproxy;

	beforeAll(async () => {
		ca = await createTestCa("crt-list test root");
		h = await startHaproxy({});
	});
	afterEach(async () => {
		await assertReloadSafe(h, { except: leftToReload.splice(0) });
	});
	afterAll(async () => {
		await h?.stop();
	});

	it("adds a new certificate into the configured crt_list", async () => {
		const driver = endpoint(h, { crt_list: h.crtListPath });
		try {
			const { bundle } = await bundleOf(ca, ["listed.test"], { serial: "4A01" });
			const runtimeName = join(h.crtDir, "listed.pem");
			expect(
				(await driver.apply({ op: "storage-create", ref: "listed.pem", certificate: "l", bundle }, signal))
					.ok,
			).toBe(true);
			const add = await driver.apply(
				{ op: "runtime-add", ref: "listed.pem", runtimeName, crtList: "", certificate: "l", bundle },
				signal,
			);
			expect(add).toMatchObject({ ok: true });
			expect(add.note).toBeUndefined();
			expect((await driver.probe?.("listed.test", signal))?.serial).toBe("4A01");
			expect((await refsOf(driver)).get("listed.pem")?.crtLists).toEqual([h.crtListPath]);
		} finally {
			await driver.close();
		}
	});

	it("reports a new certificate that cannot go live without reload as pending, and never reloads", async () => {
		const pid = await h.workerPid();
		const driver = endpoint(h, { crt_list: join(h.dir, "not-bound.list") });
		try {
			const { bundle } = await bundleOf(ca, ["later.test"]);
			const add = await driver.apply(
				{
					op: "runtime-add",
					ref: "later.pem",
					runtimeName: join(h.crtDir, "later.pem"),
					crtList: "",
					certificate: "x",
					bundle,
				},
				signal,
			);
			expect(add.ok).toBe(true);
			expect(add.note).toMatch(/^pending reload/);
			expect(await h.workerPid()).toBe(pid);
		} finally {
			await driver.close();
		}
	});

	it("an unreachable socket is an observation failure value, not a throw", async () => {
		const driver = endpoint(h, { socket: join(h.dir, "nope.sock") });
		const o = await driver.observe(signal);
		expect(o.ok).toBe(false);
		if (!o.ok) expect(o.error.code).toBe("ENDPOINT_UNAVAILABLE");
		await driver.close();
	});
});
