/**
 * The seed's thrash loop, on a small model of HAProxy's rules (storage delete leaves the runtime listing;
 * a certificate in a crt-list cannot be deleted from runtime): ten cycles of classify → plan → apply.
 * The same scenario runs against a real HAProxy in test/reconcile/fleet.test.ts.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { classifyEndpoint } from "../../src/reconcile/classify.js";
import type { Action, DesiredCertificate, ObservedRef, RefMeta } from "../../src/reconcile/model.js";
import { planEndpoint } from "../../src/reconcile/plan.js";
import { desiredCert, metaOf, oldMeta, removePolicy } from "./scenario.js";

interface Node {
	storage: Map<string, RefMeta>;
	runtime: Map<string, { meta: RefMeta; crtLists: string[] }>;
	writes: Array<{ op: Action["op"]; ref: string }>;
	reloads: number;
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

function apply(node: Node, action: Action): boolean {
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

function metaFromBundle(action: Action): RefMeta {
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
	for (const step of plan.steps) apply(node, step.action);
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
	});
});
