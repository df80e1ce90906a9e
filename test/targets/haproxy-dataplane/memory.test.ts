/** When an incremental observation may reuse the last one (memory.ts): pure, a table of surprises. */
import { describe, expect, it } from "vitest";
import type { HaproxyAction } from "../../../src/targets/haproxy/engine/model.js";
import {
	fullBecause,
	intern,
	type Listing,
	noteWrite,
	type ObservationMemory,
	reusable,
	untouched,
} from "../../../src/targets/haproxy-dataplane/memory.js";

const worker = { pid: 42, startedAt: 1_000_000 };
const memory: ObservationMemory = {
	worker,
	uptimeSec: 100,
	storage: new Map([
		["a.pem", { storageName: "a.pem", file: "/ssl/a.pem", meta: { serial: "01" } }],
		["b.pem", { storageName: "b.pem", file: "/ssl/b.pem", meta: { serial: "02" } }],
	]),
	runtime: new Map([["/ssl/a.pem", { name: "/ssl/a.pem", meta: { serial: "01" } }]]),
	crtLists: "[]",
	sinceFull: 0,
};
const listing: Listing = {
	worker,
	uptimeSec: 130,
	storage: [
		{ storageName: "a.pem", file: "/ssl/a.pem" },
		{ storageName: "b.pem", file: "/ssl/b.pem" },
	],
	runtime: ["/ssl/a.pem"],
	crtLists: "[]",
};
const rules = { every: 10, masterRuntime: true };

describe("fullBecause", () => {
	it.each<[string, Partial<Listing>, Partial<ObservationMemory> | undefined, string | undefined]>([
		["nothing changed", {}, {}, undefined],
		["the first observation", {}, undefined, "first"],
		["the every-th", {}, { sinceFull: 9 }, "every 10"],
		["no worker named", { worker: undefined }, {}, "the API names no worker"],
		["another pid (a reload)", { worker: { pid: 43, startedAt: 1_030_000 } }, {}, "worker changed"],
		["a smaller uptime (a restart)", { uptimeSec: 5 }, {}, "worker restarted"],
		[
			"a file added",
			{ storage: [...listing.storage, { storageName: "c.pem", file: "/ssl/c.pem" }] },
			{},
			"storage listing changed",
		],
		[
			"a file swapped for another",
			{ storage: [listing.storage[0]!, { storageName: "c.pem", file: "/ssl/c.pem" }] },
			{},
			"storage listing changed",
		],
		["a store added", { runtime: ["/ssl/a.pem", "/ssl/b.pem"] }, {}, "runtime listing changed"],
		["a store swapped", { runtime: ["/ssl/b.pem"] }, {}, "runtime listing changed"],
		["a crt-list edited", { crtLists: '[{"list":"x"}]' }, {}, "crt-lists changed"],
	])("%s", (_, now, mem, why) => {
		const m = mem === undefined ? undefined : { ...memory, ...mem };
		expect(fullBecause(m, untouched(), { ...listing, ...now }, rules)).toBe(why);
	});

	const bundle = {} as Extract<HaproxyAction, { op: "storage-create" }>["bundle"];
	it("after certificatee's writes: contents are read again, anything else makes the next observation full", () => {
		const touched = untouched();
		noteWrite(
			touched,
			{ op: "storage-replace", ref: "a.pem", certificate: "a", bundle },
			{ action: {} as HaproxyAction, ok: true },
		);
		noteWrite(
			touched,
			{ op: "runtime-set", ref: "a.pem", runtimeName: "/ssl/a.pem", certificate: "a", bundle },
			{ action: {} as HaproxyAction, ok: true },
		);
		expect(fullBecause(memory, touched, listing, rules)).toBeUndefined();
		const reuse = reusable(memory, touched);
		expect([reuse.storage("a.pem"), reuse.runtime("/ssl/a.pem")]).toEqual([undefined, undefined]);
		expect(reuse.storage("b.pem")?.meta.serial).toBe("02");
		// Through a worker's stats socket, a write is followed by a full observation.
		expect(fullBecause(memory, touched, listing, { ...rules, masterRuntime: false })).toMatch(/stats socket/);

		for (const [action, ok, reload] of [
			[{ op: "storage-create", ref: "c.pem", certificate: "c", bundle }, true, false],
			[{ op: "storage-replace", ref: "a.pem", certificate: "a", bundle }, false, false],
			[{ op: "storage-replace", ref: "a.pem", certificate: "a", bundle }, true, true],
			[{ op: "runtime-delete", ref: "a.pem", runtimeName: "/ssl/a.pem" }, true, false],
		] as Array<[HaproxyAction, boolean, boolean]>) {
			const t = untouched();
			noteWrite(t, action, { action, ok, ...(reload ? { reloadCaused: { reason: "202" } } : {}) });
			expect(fullBecause(memory, t, listing, rules), `${action.op} ok=${ok} reload=${reload}`).toMatch(
				/certificatee added or removed/,
			);
		}
	});
});

describe("intern", () => {
	it("holds one copy of an item many endpoints list alike, and tells different ones apart", () => {
		const a = intern({ storageName: "x.pem", file: "/ssl/x.pem", meta: { serial: "0A", names: ["x.test"] } });
		const b = intern({ storageName: "x.pem", file: "/ssl/x.pem", meta: { serial: "0A", names: ["x.test"] } });
		const c = intern({ storageName: "x.pem", file: "/ssl/x.pem", meta: { serial: "0B", names: ["x.test"] } });
		const d = intern({
			storageName: "x.pem",
			file: "/other/x.pem",
			meta: { serial: "0A", names: ["x.test"] },
		});
		expect(b).toBe(a);
		expect(c).not.toBe(a);
		expect(d).not.toBe(a);
	});
});
