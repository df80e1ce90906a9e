/**
 * The reload budget on a real HAProxy in master-worker mode (haproxy-runtime target, `master_cli`): a renewal
 * too large to hot-swap (tune.bufsize 8192) is only live after a reload. The worker pid says whether HAProxy
 * reloaded, a TLS probe by SNI what it serves; the budget is kept in a real state store across a restart.
 */
import { appendFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { endpointState } from "../../../../src/reconcile/convergence.js";
import { endpointFailures } from "../../../../src/reconcile/failures.js";
import { type FileStore, openFileStore } from "../../../../src/store/file-store.js";
import { storedFleetMemory } from "../../../../src/targets/haproxy/engine/fleet-memory.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../../harness/certs.js";
import { HAPROXY_VERSION, type Haproxy, haproxyLine } from "../../../harness/haproxy.js";
import { assertReloadSafe } from "../../../harness/invariant.js";
import { syncOnce as cycle, rig, servedSerial as served } from "../../../harness/targets.js";
import { desiredFromLeaf as desired } from "../../../reconcile/scenario.js";

const BUFSIZE = 8192;
let ca: TestIssuer;
let chain: TestIssuer[];
// Pending-reload states differ from what a reload serves by design: each test checks reload safety itself,
// except for the names it leaves pending.
const r = rig();

beforeAll(async () => {
	ca = await createTestCa("reload budget CA");
	// Long-named intermediates: a bundle over tune.bufsize, never hot-swapped (it would crash HAProxy 2.6).
	chain = [];
	let issuer = ca;
	for (let i = 0; i < 6; i++) {
		issuer = await createTestCa(`budget intermediate ${i} ${"x".repeat(300)}`, { issuer });
		chain.unshift(issuer);
	}
});

const big = (names: string[]) => issueTestLeaf(ca, { names, intermediates: chain });
const normal = (serial: string) => {
	const hex = serial.toUpperCase().replace(/^0+(?=.)/, "");
	return hex.length % 2 ? `0${hex}` : hex;
};

async function node(start: TestLeaf) {
	const h = await r.haproxy({ crtDir: { "a.pem": start.combinedPem }, bufsize: BUFSIZE });
	return h;
}

async function stateStore(): Promise<FileStore> {
	const dir = await mkdtemp(join(tmpdir(), "certificatee-reloads-"));
	const store = await openFileStore(dir);
	r.onTeardown(async () => {
		store.close();
		await rm(dir, { recursive: true, force: true });
	});
	return store;
}

function target(h: Haproxy, maxPerHour: number, store?: FileStore) {
	return r.runtime(
		h,
		{ bufsize: BUFSIZE, master_cli: h.masterSocket, reloads: { max_per_hour: maxPerHour } },
		store
			? {
					haproxy: {
						memory: (name) => storedFleetMemory(name, { store, readOnly: false, warn: () => undefined }),
					},
				}
			: {},
	);
}

describe("reload budget (haproxy-runtime, master CLI, real HAProxy)", () => {
	it("max_per_hour 0 (the default): the too-large renewal is pending with its reason, and HAProxy is not reloaded", async () => {
		const names = ["a.test"];
		const first = await issueTestLeaf(ca, { names });
		const h = await node(first);
		const pid = await h.workerPid();
		const renewed = await big(names);
		expect(Buffer.byteLength(renewed.combinedPem)).toBeGreaterThan(BUFSIZE);
		const e = await cycle(r.runtime(h, { bufsize: BUFSIZE }), [desired("a", renewed, names)], {
			expectOk: true,
		});
		expect(e.reloads?.cycle).toMatchObject({
			decision: "held",
			code: "RELOAD_DISABLED",
			reasons: ["too-large"],
		});
		expect(e.reloads?.cycle?.message).toMatch(/too-large: a\.pem.*max_per_hour: 0/);
		expect(e.reloads?.budget).toMatchObject({ maxPerHour: 0, used: 0, remaining: 0 });
		expect(e.steps.find((s) => s.op === "runtime-set")?.note).toMatch(/RELOAD_DISABLED/);
		expect(await h.workerPid()).toBe(pid);
		expect(await served(h, "a.test")).toBe(normal(first.serial));
		// The file holds the renewal: a reload by the operator serves it.
		expect(await readFile(join(h.crtDir, "a.pem"), "utf8")).toBe(renewed.combinedPem);
		await assertReloadSafe(h, { except: names });
	});

	it("budget 1: one reload serves the renewal; a second change in the hour is pending (budget exhausted), also after a restart", async () => {
		const names = ["b.test"];
		const first = await issueTestLeaf(ca, { names });
		const h = await node(first);
		const store = await stateStore();
		const pid = await h.workerPid();
		const renewed = await big(names);
		const e = await cycle(target(h, 1, store), [desired("a", renewed, names)], { expectOk: true });
		expect(e.reloads?.cycle).toMatchObject({ decision: "reloaded", result: "ok", reasons: ["too-large"] });
		expect(e.reloads?.budget).toMatchObject({ maxPerHour: 1, used: 1, remaining: 0 });
		expect(e.reloads?.breaker).toBeUndefined();
		const after = await h.workerPid();
		expect(after).not.toBe(pid);
		expect(await served(h, "b.test")).toBe(normal(renewed.serial));
		// The step the reload made live is settled on what the new worker holds: the endpoint converged.
		expect(endpointState(e)).toEqual({ state: "converged" });

		// A restart (a new target on the same state store) remembers the reload: the budget stays spent.
		const again = await big(names);
		const second = await cycle(target(h, 1, store), [desired("a", again, names)], { expectOk: true });
		expect(second.reloads?.cycle).toMatchObject({ decision: "held", code: "RELOAD_BUDGET_EXHAUSTED" });
		expect(second.reloads?.cycle?.message).toMatch(/budget exhausted: 1 of 1 reloads in the last hour/);
		expect(endpointState(second)).toMatchObject({ state: "failed" });
		expect(await h.workerPid()).toBe(after);
		expect(await served(h, "b.test")).toBe(normal(renewed.serial));
		await assertReloadSafe(h, { except: names });
	});

	it(`a failing reload (broken configuration) opens the breaker: an error naming HAProxy's reason (2.6: show proc's failed count; 2.8+: the reload's ALERT; here ${HAPROXY_VERSION}), no further writes, until the node serves what was written`, async () => {
		const names = ["c.test"];
		const first = await issueTestLeaf(ca, { names });
		const h = await node(first);
		const t = target(h, 5);
		const pid = await h.workerPid();
		const config = await readFile(h.configPath, "utf8");
		await appendFile(
			h.configPath,
			"\nfrontend broken\n    bind 127.0.0.1:1 ssl crt /nonexistent/broken.pem\n",
		);
		const renewed = await big(names);
		const e = await cycle(t, [desired("a", renewed, names)], { expectOk: true });
		expect(e.reloads?.cycle).toMatchObject({ decision: "reloaded", result: "failed" });
		expect(e.reloads?.breaker).toMatchObject({ code: "RELOAD_FAILED" });
		// 2.6 answers `reload` with nothing (show proc's failed count tells); 2.8+ with Success=0 and the ALERT.
		expect(e.reloads?.breaker?.message).toMatch(
			haproxyLine() >= 207
				? /HAProxy failed to load its configuration on reload: config : parsing \[.*haproxy\.cfg:\d+\] : 'bind 127\.0\.0\.1:1' in section 'frontend' : unable to stat SSL certificate from file '\/nonexistent\/broken\.pem' : No such file or directory\.; worker \d+ keeps serving the old certificates/
				: /HAProxy failed to load its configuration on reload \(show proc: failed 1\); worker \d+ keeps serving the old certificates/,
		);
		expect(endpointFailures(e)).toContainEqual(
			expect.objectContaining({ kind: "reload", code: "RELOAD_FAILED" }),
		);
		expect(await h.workerPid()).toBe(pid);
		expect(await served(h, "c.test")).toBe(normal(first.serial));

		// Open: the next change is not written at all.
		const next = await issueTestLeaf(ca, { names });
		const blocked = await cycle(t, [desired("a", next, names)], { expectOk: true });
		expect(blocked.steps.length).toBeGreaterThan(0);
		expect(blocked.steps.every((s) => s.result === "skipped" && /breaker open/.test(s.note ?? ""))).toBe(
			true,
		);
		expect(endpointFailures(blocked)).toContainEqual(
			expect.objectContaining({ kind: "reload", code: "RELOAD_BREAKER_OPEN" }),
		);
		expect(await readFile(join(h.crtDir, "a.pem"), "utf8")).toBe(renewed.combinedPem);

		// The operator fixes the configuration and reloads: the node serves what was written, the breaker closes.
		await writeFile(h.configPath, config);
		await h.reload();
		const closed = await cycle(t, [desired("a", renewed, names)], { expectOk: true });
		expect(closed.reloads?.breaker).toBeUndefined();
		expect(closed.notes.join("\n")).toMatch(/reload breaker closed/);
		expect(endpointState(closed)).toEqual({ state: "converged" });
		await assertReloadSafe(h);
	});
});

describe("reload budget (haproxy-dataplane, force_reload through the Data Plane API double)", () => {
	// A `crt <dir>/` bind and no crt_list: a new certificate stored through the API is live only after a reload.
	it("a new certificate on a crt directory: pending at 0, one forced reload at 1 serves it, the next is budget exhausted", async () => {
		const h = await r.haproxy();
		const d = await r.dpapi(h);
		const pid = await h.workerPid();
		const n = await issueTestLeaf(ca, { names: ["n.test"] });
		const want = [desired("n", n, ["n.test"])];

		const held = await cycle(r.dataplane(h, d), want, { expectOk: true });
		expect(held.reloads?.cycle).toMatchObject({
			decision: "held",
			code: "RELOAD_DISABLED",
			reasons: ["new-certificate"],
		});
		expect(endpointState(held)).toMatchObject({
			state: "pending",
			reason: expect.stringMatching(/new-certificate: n\.pem/),
		});
		expect(d.requests.some((q) => q.query.includes("force_reload"))).toBe(false);
		expect(await h.workerPid()).toBe(pid);

		const t = r.dataplane(h, d, { reloads: { max_per_hour: 1 } });
		const done = await cycle(t, want, { expectOk: true });
		expect(done.reloads?.cycle).toMatchObject({
			decision: "reloaded",
			result: "ok",
			reasons: ["new-certificate"],
		});
		const forced = d.requests.filter((q) => q.query.includes("force_reload=true"));
		expect(forced).toEqual([
			expect.objectContaining({ operation: "replaceStorageSSLCertificate", status: 200 }),
		]);
		expect(await h.workerPid()).not.toBe(pid);
		expect(await served(h, "n.test")).toBe(normal(n.serial));
		expect(endpointState(done)).toEqual({ state: "converged" });

		const m = await issueTestLeaf(ca, { names: ["m.test"] });
		const second = await cycle(t, [...want, desired("m", m, ["m.test"])], { expectOk: true });
		expect(second.reloads?.cycle).toMatchObject({ decision: "held", code: "RELOAD_BUDGET_EXHAUSTED" });
		expect(d.requests.filter((q) => q.query.includes("force_reload=true"))).toHaveLength(1);
		expect(await served(h, "m.test")).not.toBe(normal(m.serial));
		await assertReloadSafe(h, { except: ["m.test"] });
	});

	it("a forced reload the API answers 400 (broken haproxy.cfg) opens the breaker; the next cycle writes nothing", async () => {
		const h = await r.haproxy();
		const d = await r.dpapi(h);
		const t = r.dataplane(h, d, { reloads: { max_per_hour: 5 } });
		const pid = await h.workerPid();
		await appendFile(
			h.configPath,
			"\nfrontend broken\n    bind 127.0.0.1:1 ssl crt /nonexistent/broken.pem\n",
		);
		const n = await issueTestLeaf(ca, { names: ["n.test"] });
		const e = await cycle(t, [desired("n", n, ["n.test"])], { expectOk: true });
		expect(e.reloads?.cycle).toMatchObject({ decision: "reloaded", result: "failed" });
		expect(e.reloads?.breaker?.message).toMatch(/Reload failed/);
		expect(endpointFailures(e)).toContainEqual(
			expect.objectContaining({ kind: "reload", code: "RELOAD_FAILED" }),
		);
		expect(await h.workerPid()).toBe(pid);

		const writes = () =>
			d.requests.filter((q) => q.method.toUpperCase() !== "GET").map((q) => `${q.method} ${q.path}`);
		const writesBefore = writes().length;
		const o = await issueTestLeaf(ca, { names: ["o.test"] });
		const blocked = await cycle(t, [desired("n", n, ["n.test"]), desired("o", o, ["o.test"])], {
			expectOk: true,
		});
		expect(blocked.steps.every((s) => s.result === "skipped")).toBe(true);
		expect(writes().slice(writesBefore)).toEqual([]);
		expect(endpointFailures(blocked)).toContainEqual(
			expect.objectContaining({ kind: "reload", code: "RELOAD_BREAKER_OPEN" }),
		);
		// Like dataplaneapi, the double restored haproxy.cfg from its last known good copy.
		await assertReloadSafe(h, { except: ["n.test"] });
	});
});
