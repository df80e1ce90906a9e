import { describe, expect, it } from "vitest";
import { rendezvousOwner } from "../../src/cluster/rendezvous.js";

const ids = Array.from({ length: 3000 }, (_, i) => `lb-${i}.example.net:9443`);
const owners = (members: readonly string[]) => new Map(ids.map((id) => [id, rendezvousOwner(id, members)]));
const counts = (m: Map<string, string | undefined>) => {
	const c = new Map<string | undefined, number>();
	for (const o of m.values()) c.set(o, (c.get(o) ?? 0) + 1);
	return c;
};

describe("rendezvous hashing", () => {
	it.each([
		{ members: [] as string[], owner: undefined },
		{ members: ["lb-ctl-1"], owner: "lb-ctl-1" },
	])("$members.length member(s): owner $owner", ({ members, owner }) => {
		expect(rendezvousOwner("haproxy-1:9443", members)).toBe(owner);
	});

	it("does not depend on the order or repetition of the member list", () => {
		const a = ["lb-ctl-1", "lb-ctl-2", "lb-ctl-3", "lb-ctl-4"];
		const b = [...a].reverse().concat(a);
		for (const id of ids.slice(0, 500)) expect(rendezvousOwner(id, b)).toBe(rendezvousOwner(id, a));
	});

	it.each([2, 3, 5, 8])("spreads 3000 ids over %i members within 15%% of an even share", (n) => {
		const members = Array.from({ length: n }, (_, i) => `lb-ctl-${i + 1}`);
		const c = counts(owners(members));
		expect([...c.keys()].sort()).toEqual([...members].sort());
		const even = ids.length / n;
		for (const count of c.values()) expect(Math.abs(count - even) / even).toBeLessThan(0.15);
	});

	it("moves only the leaving member's ids, spread over all the others", () => {
		const all = ["lb-ctl-1", "lb-ctl-2", "lb-ctl-3", "lb-ctl-4"];
		const before = owners(all);
		const after = owners(all.filter((m) => m !== "lb-ctl-3"));
		const moved = ids.filter((id) => before.get(id) !== after.get(id));
		expect(moved.every((id) => before.get(id) === "lb-ctl-3")).toBe(true);
		expect(moved.length).toBe(counts(before).get("lb-ctl-3"));
		expect(new Set(moved.map((id) => after.get(id)))).toEqual(new Set(["lb-ctl-1", "lb-ctl-2", "lb-ctl-4"]));
	});

	it("gives a joining member about an even share, taken from the others only", () => {
		const before = owners(["lb-ctl-1", "lb-ctl-2", "lb-ctl-3"]);
		const after = owners(["lb-ctl-1", "lb-ctl-2", "lb-ctl-3", "lb-ctl-4"]);
		const moved = ids.filter((id) => before.get(id) !== after.get(id));
		expect(moved.every((id) => after.get(id) === "lb-ctl-4")).toBe(true);
		expect(Math.abs(moved.length - ids.length / 4) / (ids.length / 4)).toBeLessThan(0.15);
	});
});
