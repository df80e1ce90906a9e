import { describe, expect, it } from "vitest";
import { apiAddressable, canonicalRef, sanitizeStorageName } from "../../../src/targets/haproxy/naming.js";

describe("targets/haproxy/naming", () => {
	it("sanitises like client-native's misc.SanitizeFilename (its own test table, plus storage names)", () => {
		const cases: Array<[string, string]> = [
			// client-native misc/stringutil_test.go
			[".....file.map!!@#", "_file.map_"],
			[".hidden", "_hidden"],
			[".unusual.", "_unusual."],
			["#1_?a;b/c!&?", "_1__a_b_c_"],
			["abcDEF", "abcDEF"],
			// storage names
			["example.com.pem", "example_com.pem"],
			["a b+c.d.pem", "a_b_c_d.pem"],
			["plain-name_1.pem", "plain-name_1.pem"],
			["dir/../x.pem", "x.pem"],
			["x.p em", "x.p_em"],
		];
		for (const [input, want] of cases) expect(sanitizeStorageName(input), input).toBe(want);
	});

	it("a name is addressable through the API only when the sanitiser keeps it", () => {
		expect(apiAddressable("example_com.pem")).toBe(true);
		expect(apiAddressable("example.com.pem")).toBe(false);
		expect(apiAddressable("a b.pem")).toBe(false);
		expect(apiAddressable(canonicalRef("www.example.com"))).toBe(true);
	});
});
