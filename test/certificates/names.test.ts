import { describe, expect, it } from "vitest";
import { droppedNames, nameCovers, normaliseSerial, sameNameSet } from "../../src/certificates/names.js";

describe("certificates/names", () => {
	it.each([
		["a.example.com", "a.example.com", true],
		["A.Example.COM.", "a.example.com", true],
		["*.example.com", "a.example.com", true],
		["*.example.com", "a.b.example.com", false],
		["*.example.com", "example.com", false],
		["*.example.com", ".example.com", false],
		["example.com", "a.example.com", false],
		["127.0.0.1", "127.0.0.1", true],
		["*.0.0.1", "127.0.0.1", false],
	])("%s covers %s: %s", (pattern, name, expected) => {
		expect(nameCovers(pattern, name)).toBe(expected);
	});

	// The one names-dropped rule (classify at plan time, both HAProxy drivers at write time). The rows marked
	// "exact" are where an exact comparison of the name lists (classify's rule before issue 11) disagreed with it.
	it.each([
		[["a.test", "www.a.test"], ["a.test", "www.a.test", "new.a.test"], []],
		[["a.test", "www.a.test"], ["a.test"], ["www.a.test"]],
		[["A.Test."], ["a.test"], []],
		[["www.a.test"], ["*.a.test"], []], // exact: drops www.a.test
		[["www.a.test", "api.a.test"], ["*.a.test"], []], // exact: drops both
		[["*.a.test"], ["www.a.test"], ["*.a.test"]],
		[["a.test"], ["*.a.test"], ["a.test"]], // a wildcard covers one label, never the bare domain
		[["x.y.a.test"], ["*.a.test"], ["x.y.a.test"]], // nor two labels
		[["10.0.0.1"], ["*.0.0.1"], ["10.0.0.1"]], // nor an IP
	])("%j -> %j drops %j", (current, next, dropped) => {
		expect(droppedNames(current, next)).toEqual(dropped);
	});

	it.each([
		["0ABC", 16, "0ABC"],
		["abc", 16, "0ABC"],
		["00FF01", 16, "FF01"],
		["80", 16, "80"],
		["2748", 10, "0ABC"],
		["255", 10, "FF"],
		["0", 10, "00"],
		["ab:cd", 16, "ABCD"],
	] as const)("serial %s (radix %d) normalises to %s", (serial, radix, expected) => {
		expect(normaliseSerial(serial, radix)).toBe(expected);
	});

	it("compares SAN sets ignoring case and order", () => {
		expect(sameNameSet(["B.test", "a.test"], ["a.test", "b.test"])).toBe(true);
		expect(sameNameSet(["a.test"], ["a.test", "b.test"])).toBe(false);
	});
});
