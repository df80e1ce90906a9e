import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FileStore, openFileStore } from "../../../../src/store/file-store.js";
import { endpointsKey } from "../../../../src/store/records.js";
import type { StateStore } from "../../../../src/store/types.js";
import {
	type EndpointMemory,
	sharedFleetMemory,
	storedFleetMemory,
} from "../../../../src/targets/haproxy/engine/fleet-memory.js";

let dir: string;
let store: FileStore;
let warnings: Array<{ fields: Record<string, unknown>; message: string }>;
const warn = (fields: Record<string, unknown>, message: string) => warnings.push({ fields, message });

beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-fleet-memory-"));
	store = await openFileStore(dir);
	warnings = [];
});

afterEach(async () => {
	store.close();
	await rm(dir, { recursive: true, force: true });
});

const down: EndpointMemory = { failures: 3, skipLeft: 2, pinned: {} };
const pinned: EndpointMemory = { failures: 0, skipLeft: 0, pinned: { "b.pem": "409", "a.pem": "409" } };
const memoryOf = (target: string, readOnly = false) =>
	storedFleetMemory(target, { store, readOnly, locate: store.pathOf, warn });
const version = async (target: string) => (await store.get(endpointsKey(target)))?.version ?? 0;

describe("fleet memory in the state store", () => {
	it("saves only what changed: nothing to remember writes nothing, the same memory twice writes once", async () => {
		const m = memoryOf("lb");
		expect(await m.load(["e1"])).toEqual(new Map());
		await m.save(new Map([["e1", { failures: 0, skipLeft: 0, pinned: {} }]]));
		expect(await version("lb")).toBe(0);
		await m.save(new Map([["e1", pinned]]));
		await m.save(new Map([["e1", { ...pinned, pinned: { "a.pem": "409", "b.pem": "409" } }]]));
		expect(await version("lb")).toBe(1);
		const again = memoryOf("lb");
		expect(await again.load(["e1"])).toEqual(new Map([["e1", pinned]]));
		await again.save(new Map([["e1", pinned]]));
		expect(await version("lb")).toBe(1);
	});

	it("drops endpoints no longer configured (saved at the next save)", async () => {
		await memoryOf("lb").save(
			new Map([
				["e1", down],
				["gone", pinned],
			]),
		);
		const m = memoryOf("lb");
		const loaded = await m.load(["e1"]);
		expect([...loaded.keys()]).toEqual(["e1"]);
		await m.save(loaded);
		expect(await memoryOf("lb").load(["e1", "gone"])).toEqual(new Map([["e1", down]]));
	});

	it("plan and status (read-only) load and never write", async () => {
		await memoryOf("lb").save(new Map([["e1", down]]));
		const m = memoryOf("lb", true);
		expect(await m.load(["e1"])).toEqual(new Map([["e1", down]]));
		await m.save(new Map());
		expect(await version("lb")).toBe(1);
	});

	it("a record of the wrong shape: logged with its file, started from empty, replaced at the next change", async () => {
		const file = store.pathOf(endpointsKey("lb"));
		await mkdir(dirname(file), { recursive: true });
		await writeFile(file, JSON.stringify({ version: 4, value: { endpoints: { e1: { failures: "x" } } } }));
		const m = memoryOf("lb");
		expect(await m.load(["e1"])).toEqual(new Map());
		expect(warnings.map((w) => w.fields.file)).toEqual([file]);
		await m.save(new Map([["e1", down]]));
		expect(await version("lb")).toBe(5);
	});

	it("a file that is not JSON: logged with its path, kept in memory only (not overwritten) until deleted", async () => {
		const file = store.pathOf(endpointsKey("lb"));
		await mkdir(dirname(file), { recursive: true });
		await writeFile(file, "{not json");
		const m = memoryOf("lb");
		expect(await m.load(["e1"])).toEqual(new Map());
		await m.save(new Map([["e1", down]]));
		await m.save(new Map([["e1", { ...down, skipLeft: 1 }]]));
		expect(await readFile(file, "utf8")).toBe("{not json");
		expect(warnings.map((w) => w.fields.file)).toEqual([file, file]);
		expect(warnings[1]?.message).toMatch(/delete it/);
	});

	it("every target name is one key of its own under endpoints/", () => {
		const names = ["lb", "lb-1", "lb_1", "lb.1", "-lb", "_2dlb", "x_2dlb", "lb/../x", "lb 1", "lbé"];
		const keys = names.map(endpointsKey);
		expect(new Set(keys).size).toBe(names.length);
		for (const key of keys) expect(key).toMatch(/^endpoints\/[A-Za-z0-9][A-Za-z0-9_-]*$/);
		expect(endpointsKey("fra-staging")).toBe("endpoints/fra-staging");
		for (const key of keys) expect(() => store.pathOf(key)).not.toThrow();
	});
});

describe("fleet memory shared by replicas (a cluster)", () => {
	const shared = (s: StateStore = store) => sharedFleetMemory("lb", { store: s, readOnly: false, warn });

	it("each replica replaces only the endpoints it ran; what others wrote for theirs is kept", async () => {
		const a = shared();
		const b = shared();
		await a.save(new Map([["e1", down]]), ["e1"]);
		await b.save(new Map([["e2", pinned]]), ["e2"]);
		expect(await shared().load(["e1", "e2"])).toEqual(
			new Map([
				["e1", down],
				["e2", pinned],
			]),
		);
		// e1 recovered on A: its entry goes, B's stays; a stale copy of e2 in A's map is not written back.
		await a.save(new Map([["e2", { failures: 9, skipLeft: 9, pinned: {} }]]), ["e1"]);
		expect(await shared().load(["e1", "e2"])).toEqual(new Map([["e2", pinned]]));
	});

	it("loads what the store holds at every call (endpoints move between replicas)", async () => {
		const a = shared();
		expect(await a.load(["e1"])).toEqual(new Map());
		await shared().save(new Map([["e1", down]]), ["e1"]);
		expect(await a.load(["e1"])).toEqual(new Map([["e1", down]]));
		expect(a.shared).toBe(true);
	});

	it("a write by another replica between its read and its write: read again and merged, nothing lost", async () => {
		let raced = false;
		const racing: StateStore = {
			...store,
			get: (key) => store.get(key),
			list: (prefix) => store.list(prefix),
			watch: (prefix, cb) => store.watch(prefix, cb),
			async put(key, value, expected) {
				if (!raced) {
					raced = true;
					await shared().save(new Map([["e2", pinned]]), ["e2"]);
				}
				return store.put(key, value, expected);
			},
		};
		await shared(racing).save(new Map([["e1", down]]), ["e1"]);
		expect(await shared().load(["e1", "e2"])).toEqual(
			new Map([
				["e1", down],
				["e2", pinned],
			]),
		);
		expect(warnings).toEqual([]);
	});

	it("plan and status (read-only) never write", async () => {
		await sharedFleetMemory("lb", { store, readOnly: true, warn }).save(new Map([["e1", down]]), ["e1"]);
		expect(await version("lb")).toBe(0);
	});
});
