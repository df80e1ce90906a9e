/**
 * The seed's thrash loop, on a small model of HAProxy's rules (storage delete leaves the runtime listing;
 * a certificate in a crt-list cannot be deleted from runtime): ten cycles of classify → plan → apply.
 * The same scenario runs against a real HAProxy in the fleet tests (runtime-target.test.ts, dataplane-target.test.ts).
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { DesiredCertificate, RefMeta } from "../../../../src/reconcile/model.js";
import { classifyEndpoint } from "../../../../src/targets/haproxy/engine/classify.js";
import type { HaproxyAction, ObservedRef } from "../../../../src/targets/haproxy/engine/model.js";
import { planEndpoint } from "../../../../src/targets/haproxy/engine/plan.js";
import { desiredCert, metaOf, oldMeta, removePolicy } from "../../../reconcile/scenario.js";

interface Node {
	storage: Map<string, RefMeta>;
	runtime: Map<string, { meta: RefMeta; crtLists: string[] }>;
	writes: Array<{ op: HaproxyAction["op"]; ref: string }>;
	/** Reloads HAProxy did: certificatee never asks for one, so only an unrelated one (reload()) counts. */
	reloads: number;
}

/** An unrelated reload: HAProxy loads every storage file afresh into its crt directory; memory-only changes are gone. */
function reload(node: Node): void {
	node.reloads += 1;
	node.runtime = new Map([...node.storage].map(([ref, meta]) => [ref, { meta, crtLists: ["/ssl"] }]));
}

/** What HAProxy holds in memory, ref -> serial: a reload changes nothing when it equals what the files say. */
function inMemory(node: Node): Record<string, string | undefined> {
	return Object.fromEntries([...node.runtime].map(([ref, r]) => [ref, r.meta.serial]));
}

function onDisk(node: Node): Record<string, string | undefined> {
	return Object.fromEntries([...node.storage].map(([ref, meta]) => [ref, meta.serial]));
}

function observe(node: Node): ObservedRef[] {
	const names = new Set([...node.storage.keys(), ...node.runtime.keys()]);
	return [...names].map((ref) => {
		const rt = node.runtime.get(ref);
		const st = node.storage.get(ref);
		return {
			ref,
			runtimeName: `/ssl/${ref}`,
			...(st ? { storage: st } : {}),
			...(rt ? { runtime: rt.meta } : {}),
			crtLists: rt?.crtLists ?? [],
		};
	});
}

function apply(node: Node, action: HaproxyAction): boolean {
	node.writes.push({ op: action.op, ref: action.ref });
	const rt = node.runtime.get(action.ref);
	switch (action.op) {
		case "storage-create":
			if (node.storage.has(action.ref)) return false;
			node.storage.set(action.ref, metaFromBundle(action));
			return true;
		case "storage-replace":
			if (!node.storage.has(action.ref)) return false; // PUT never creates
			node.storage.set(action.ref, metaFromBundle(action));
			return true;
		case "storage-delete":
			return node.storage.delete(action.ref); // runtime keeps it until a reload
		case "runtime-set":
			if (!rt) return false;
			rt.meta = metaFromBundle(action);
			return true;
		case "runtime-add":
			node.runtime.set(action.ref, { meta: metaFromBundle(action), crtLists: [action.crtList] });
			return true;
		case "crt-list-remove":
			if (!rt) return false;
			rt.crtLists = rt.crtLists.filter((l) => l !== action.crtList);
			return true;
		case "crt-list-file-add":
		case "crt-list-file-remove":
			return true; // this node has no crt-list files
		case "runtime-delete":
			if (!rt || rt.crtLists.length > 0) return false; // "in use, can't be deleted"
			node.runtime.delete(action.ref);
			return true;
		case "runtime-reinsert":
			return rt !== undefined;
	}
}

function metaFromBundle(action: HaproxyAction): RefMeta {
	if (!("bundle" in action)) throw new Error("no bundle");
	return {
		serial: action.bundle.leaf.serial,
		sha1: action.bundle.leaf.sha1,
		names: [...action.bundle.leaf.dnsNames].sort(),
		status: "Used",
	};
}

function cycle(node: Node, desired: DesiredCertificate[]): number {
	const refs = observe(node);
	const d = desired.map((c) => ({ ref: `${c.name}.pem`, certificate: c }));
	const verdicts = classifyEndpoint({ desired: d, refs, policy: removePolicy });
	const plan = planEndpoint({
		verdicts,
		desired: new Map(desired.map((c) => [c.name, c])),
		refs: new Map(refs.map((r) => [r.ref, r])),
		runtimeNameFor: (r) => `/ssl/${r}`,
		newCertificateCrtList: "/ssl",
		legacyDuplicates: "remove",
	});
	// Every write is one HAProxy accepts: a refused one (false) would be retried, and fail, every cycle.
	const refused = plan.steps
		.filter((step) => !apply(node, step.action))
		.map((s) => `${s.action.op} ${s.action.ref}`);
	expect(refused).toEqual([]);
	// Memory and files agree after the writes: nothing waits for a reload, and a reload undoes nothing.
	expect(inMemory(node)).toEqual(onDisk(node));
	return plan.steps.length;
}

let keeper: DesiredCertificate;
beforeAll(async () => {
	keeper = await desiredCert("barsone", ["barsone.test"]);
});

describe("reconcile: convergence on a model of HAProxy's rules", () => {
	it("the seed: the duplicate is deleted once, never recreated, and cycles after converge with zero writes", () => {
		const stale = oldMeta(["barsone.test"]);
		const node: Node = {
			storage: new Map([
				["barsone.pem", metaOf(keeper)],
				["legacy_barsone.pem", stale],
			]),
			runtime: new Map([
				["barsone.pem", { meta: metaOf(keeper), crtLists: ["/ssl"] }],
				["legacy_barsone.pem", { meta: stale, crtLists: ["/ssl"] }],
			]),
			writes: [],
			reloads: 0,
		};
		const perCycle = Array.from({ length: 10 }, () => cycle(node, [keeper]));
		expect(perCycle).toEqual([3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
		const dupWrites = node.writes.filter((w) => w.ref === "legacy_barsone.pem").map((w) => w.op);
		expect(dupWrites).toEqual(["crt-list-remove", "runtime-delete", "storage-delete"]);
		expect(node.runtime.has("legacy_barsone.pem")).toBe(false);
		expect(node.storage.has("legacy_barsone.pem")).toBe(false);
		expect(node.reloads).toBe(0);
		// An unrelated reload later brings nothing back and needs no write.
		reload(node);
		expect(cycle(node, [keeper])).toBe(0);
		expect(Object.keys(inMemory(node))).toEqual(["barsone.pem"]);
	});

	it("a renewal with an unstable keeper syncs the duplicate first, then removes it the next cycle", async () => {
		const renewed = await desiredCert("barsone", ["barsone.test"]);
		const node: Node = {
			storage: new Map([
				["barsone.pem", metaOf(keeper)],
				["legacy_barsone.pem", metaOf(keeper)],
			]),
			runtime: new Map([
				["barsone.pem", { meta: metaOf(keeper), crtLists: ["/ssl"] }],
				["legacy_barsone.pem", { meta: metaOf(keeper), crtLists: ["/ssl"] }],
			]),
			writes: [],
			reloads: 0,
		};
		expect(cycle(node, [renewed])).toBe(4); // keeper storage+runtime, duplicate storage+runtime
		expect(node.runtime.get("legacy_barsone.pem")?.meta.serial).toBe(renewed.bundle.leaf.serial);
		expect(cycle(node, [renewed])).toBe(3); // now stable: removal
		expect(cycle(node, [renewed])).toBe(0);
		expect(node.reloads).toBe(0);
	});
});
