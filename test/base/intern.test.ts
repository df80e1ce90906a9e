import { describe, expect, it } from "vitest";
import { createInterner, flat, intern } from "../../src/base/intern.js";
import { parseCertDetail } from "../../src/targets/haproxy-runtime/parse.js";

describe("intern", () => {
	it("keeps one value per key and makes it once", () => {
		const kept = createInterner<{ n: number }>();
		let made = 0;
		const make = () => ({ n: ++made });
		const a = kept.get("serial-1", make);
		expect(kept.get("serial-1", make)).toBe(a);
		expect(kept.get("serial-2", make)).not.toBe(a);
		expect(made).toBe(2);
	});

	it("drops values not asked for within two generations, keeps those asked for again", () => {
		const kept = createInterner<{ key: string }>(2);
		let made = 0;
		const make = (key: string) => {
			made += 1;
			return { key };
		};
		const old = kept.get("old", make);
		const hot = kept.get("hot", make);
		// A new generation begins: "old" and "hot" are in the previous one; asking for "hot" moves it forward.
		kept.get("a", make);
		expect(kept.get("hot", make)).toBe(hot);
		kept.get("b", make);
		kept.get("c", make);
		expect(made).toBe(5);
		expect(kept.get("hot", make)).toBe(hot);
		expect(kept.get("old", make)).not.toBe(old);
	});

	it("gives equal strings, whatever they were cut from", () => {
		const answer = `Serial: ${"AB".repeat(16)}\nStatus: Used\n`;
		const serial = answer.slice(8, 40);
		expect(intern(serial)).toBe("AB".repeat(16));
		expect(flat(serial)).toBe(serial);
		expect(flat("short")).toBe("short");
	});

	it("one detail per node, the same serial, names and dates across nodes", () => {
		const detail = (node: string) =>
			parseCertDetail(
				[
					`Filename: /etc/${node}/certs/a.pem`,
					"Status: Used",
					"Serial: 0A1B2C",
					"notBefore: Nov 30 08:46:40 2026 GMT",
					"notAfter: Dec 30 08:46:40 2026 GMT",
					"Subject Alternative Name: DNS:a.example.com, DNS:B.example.com",
					"Algorithm: EC256",
					"SHA1 FingerPrint: abcdef",
					"Subject: /CN=a.example.com",
					"",
				].join("\n"),
			);
		const [one, two] = [detail("lb1"), detail("lb2")];
		expect(one.filename).toBe("/etc/lb1/certs/a.pem");
		expect(two.filename).toBe("/etc/lb2/certs/a.pem");
		expect(one.sans).toEqual(["a.example.com", "b.example.com"]);
		expect(one.sha1).toBe("ABCDEF");
		expect(one.notAfter?.toISOString()).toBe("2026-12-30T08:46:40.000Z");
		// The same Date object: one per distinct date printed, not one per node.
		expect(two.notAfter).toBe(one.notAfter);
		expect(two.notBefore).toBe(one.notBefore);
	});
});
