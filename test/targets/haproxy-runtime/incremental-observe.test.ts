/**
 * Incremental observation (issue 12): a running haproxy-runtime endpoint reads every certificate's detail in full
 * only every full_observation_every observations; the others read the listing, the crt-lists and the files' stat,
 * plus the stores certificatee itself wrote. Anything the listing, the files or the worker show that certificatee
 * did not do makes that observation a full one at once; a certificate replaced behind its back through the socket
 * alone is seen at the latest at the next full observation. Real HAProxy, real files.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../../src/certificates/bundle.js";
import type { EndpointObservation, ObservedRef } from "../../../src/targets/haproxy/engine/model.js";
import { createRuntimeEndpoint, RuntimeClient } from "../../../src/targets/haproxy-runtime/index.js";
import { runtimeTargetSchema } from "../../../src/targets/haproxy-runtime/schema.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../harness/certs.js";
import type { Haproxy } from "../../harness/haproxy.js";
import { rig } from "../../harness/targets.js";

const r = rig({ reloadSafe: true });
// The first test replaces a certificate through the socket alone, as another tool would: a reload drops that.
const behind = rig();
let ca: TestIssuer;
const leaves: Record<string, TestLeaf> = {};

beforeAll(async () => {
	ca = await createTestCa("incremental observe CA");
	for (const n of ["a", "b", "c"]) leaves[n] = await issueTestLeaf(ca, { names: [`${n}.test`] });
});

async function setup(every: number, on = r, place?: { index: number; count: number }) {
	const h = await on.haproxy({
		crtDir: Object.fromEntries(Object.entries(leaves).map(([n, l]) => [`${n}.pem`, l.combinedPem])),
	});
	const config = runtimeTargetSchema.parse({
		name: "lb1",
		type: "haproxy-runtime",
		socket: h.adminSocket,
		crt_dir: h.crtDir,
		full_observation_every: every,
	});
	const driver = createRuntimeEndpoint(config, place ? { place } : {});
	const other = new RuntimeClient({ address: h.adminSocket, name: "someone else" });
	on.onTeardown(async () => {
		await driver.close();
		await other.close();
	});
	const observe = async (desired?: string) => {
		const o = await driver.observe(
			new AbortController().signal,
			desired === undefined ? undefined : { desired },
		);
		if (!o.ok) throw o.error;
		return o;
	};
	return { h, driver, other, observe };
}

type Observed = Extract<EndpointObservation, { ok: true }>;
const kind = (o: Observed) => o.info?.observation ?? "";
const refOf = (o: Observed, ref: string) => o.refs.find((x) => x.ref === ref) as ObservedRef;

/** Replaces `name`'s content in HAProxy through the socket only, as another tool would. */
async function setBehindItsBack(other: RuntimeClient, h: Haproxy, ref: string, leaf: TestLeaf) {
	await other.setCert(join(h.crtDir, ref), leaf.combinedPem);
	await other.commitCert(join(h.crtDir, ref));
}

describe("haproxy-runtime incremental observation", () => {
	it("full at first and every N observations; a socket-only change behind its back is seen at the next full one", async () => {
		const { h, other, observe } = await setup(3, behind);
		expect(kind(await observe())).toBe("full (first)");
		expect(kind(await observe())).toBe("incremental");
		const a2 = await issueTestLeaf(ca, { names: ["a.test"] });
		await setBehindItsBack(other, h, "a.pem", a2);
		// Same names, no transaction left open, files unchanged: nothing shows it without reading every detail.
		expect(kind(await observe())).toBe("incremental");
		const full = await observe();
		expect(kind(full)).toBe("full (every 3)");
		expect(refOf(full, "a.pem").runtime?.serial).toBe(a2.serial);
		expect(refOf(full, "a.pem").storage?.serial).toBe(leaves.a?.serial);
		expect(kind(await observe())).toBe("incremental");
	});

	it("what certificatee wrote is read again: the next observation is incremental and shows it", async () => {
		const { driver, observe } = await setup(10);
		await observe();
		const b2 = await issueTestLeaf(ca, { names: ["b.test"] });
		const bundle = parseBundle({ combined: b2.combinedPem }, { source: "b2" });
		const signal = new AbortController().signal;
		const writes = await driver.applyBatch?.(
			[{ op: "storage-replace", ref: "b.pem", certificate: "b", bundle }],
			signal,
		);
		expect(writes?.[0]?.ok).toBe(true);
		const set = await driver.apply(
			{
				op: "runtime-set",
				ref: "b.pem",
				runtimeName: `${refOf(await observe(), "b.pem").runtimeName}`,
				certificate: "b",
				bundle,
			},
			signal,
		);
		expect(set.ok).toBe(true);
		const after = await observe();
		expect(kind(after)).toBe("incremental");
		expect(refOf(after, "b.pem").runtime?.serial).toBe(b2.serial);
		expect(refOf(after, "b.pem").storage?.serial).toBe(b2.serial);
	});

	it("a surprise makes a full observation at once: a file replaced, a store added, an open transaction, a reload, a failed write", async () => {
		const { h, driver, other, observe } = await setup(100);
		await observe();
		expect(kind(await observe())).toBe("incremental");

		// A storage file replaced behind its back (and the same certificate set at runtime, as a deploy hook would).
		const c2 = await issueTestLeaf(ca, { names: ["c.test"] });
		await writeFile(join(h.crtDir, "c.pem"), c2.combinedPem, { mode: 0o600 });
		await setBehindItsBack(other, h, "c.pem", c2);
		const seen = await observe();
		expect(kind(seen)).toBe("full (c.pem changed in crt_dir)");
		expect(refOf(seen, "c.pem").runtime?.serial).toBe(c2.serial);
		expect(refOf(seen, "c.pem").storage?.serial).toBe(c2.serial);

		// A new store.
		await other.newCert(join(h.crtDir, "d.pem"));
		expect(kind(await observe())).toBe("full (store names changed)");
		await other.delCert(join(h.crtDir, "d.pem"));
		expect(kind(await observe())).toBe("full (store names changed)");

		// A transaction someone left open.
		const a3 = await issueTestLeaf(ca, { names: ["a.test"] });
		await other.setCert(join(h.crtDir, "a.pem"), a3.combinedPem);
		expect(kind(await observe())).toBe("full (a transaction is open)");
		await other.abortCert(join(h.crtDir, "a.pem"));
		expect(kind(await observe())).toBe("incremental");

		// A reload.
		await h.reload();
		expect(kind(await observe())).toMatch(/^full \(worker (changed|restarted)\)$/);
		expect(kind(await observe())).toBe("incremental");

		// A failed write (an expired certificate is refused before sending): the next observation is full.
		const expired = await issueTestLeaf(ca, {
			names: ["a.test"],
			notBefore: new Date(Date.now() - 3 * 86_400_000),
			notAfter: new Date(Date.now() - 86_400_000),
		});
		const bundle = parseBundle({ combined: expired.combinedPem }, { source: "expired" });
		const refused = await driver.apply(
			{ op: "runtime-set", ref: "a.pem", runtimeName: join(h.crtDir, "a.pem"), certificate: "a", bundle },
			new AbortController().signal,
		);
		expect(refused.ok).toBe(false);
		expect(kind(await observe())).toBe("full (certificatee changed stores or crt-lists, or a write failed)");
	});

	it("a node's place among the haproxy-runtime targets sets where its schedule starts; a full observation for a reload keeps it", async () => {
		// Three nodes' drivers (one HAProxy stands in for all three: each driver keeps its own memory).
		const first = await setup(3, r, { index: 0, count: 3 });
		const observers = [first.observe];
		for (const index of [1, 2]) {
			const driver = createRuntimeEndpoint(
				runtimeTargetSchema.parse({
					name: `lb${index + 1}`,
					type: "haproxy-runtime",
					socket: first.h.adminSocket,
					crt_dir: first.h.crtDir,
					full_observation_every: 3,
				}),
				{ place: { index, count: 3 } },
			);
			r.onTeardown(() => driver.close());
			observers.push(async () => {
				const o = await driver.observe(new AbortController().signal);
				if (!o.ok) throw o.error;
				return o;
			});
		}
		const round = async () => Promise.all(observers.map(async (observe) => kind(await observe())));
		expect(await round()).toEqual(["full (first)", "full (first)", "full (first)"]);
		// The first place keeps the schedule of a node alone (its 4th observation is the every-3rd); the others are
		// one and two observations ahead, so each round observes one node in full.
		const every3 = "full (every 3)";
		expect(await round()).toEqual(["incremental", "incremental", every3]);
		expect(await round()).toEqual(["incremental", every3, "incremental"]);
		expect(await round()).toEqual([every3, "incremental", "incremental"]);

		// A reload: the next observation is full at once, and the schedule keeps its place (the every-3rd comes
		// 3 observations after the last scheduled one, not 3 after the reload's).
		await first.h.reload();
		const [afterReload] = await round();
		expect(afterReload).toMatch(/^full \(worker (changed|restarted)\)$/);
		expect((await round())[0]).toBe("incremental");
		expect((await round())[0]).toBe(every3);
	});

	it("a cycle whose desired set changed (a renewal) defers the scheduled full observation once; the next one is full", async () => {
		const { observe } = await setup(3);
		expect(kind(await observe("v1"))).toBe("full (first)");
		expect(kind(await observe("v1"))).toBe("incremental");
		expect(kind(await observe("v1"))).toBe("incremental");
		// The every-3rd (the 4th, as in the first test), in the cycle of a renewal: incremental, and it says the full one was deferred.
		expect(kind(await observe("v2"))).toBe(
			"incremental (the full one, every 3, deferred: the desired certificates changed)",
		);
		// Deferred once only: full at the next, whatever the cycle brings.
		expect(kind(await observe("v3"))).toBe("full (every 3)");
		expect(kind(await observe("v3"))).toBe("incremental");
		expect(kind(await observe("v3"))).toBe("incremental");
		// Unchanged: on schedule.
		expect(kind(await observe("v3"))).toBe("full (every 3)");
	});
});
