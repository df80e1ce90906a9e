import { describe, expect, it } from "vitest";
import { chainMatches, commonName, keyTypeOf, parseBundle } from "../../src/certificates/index.js";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";

describe("certificates/chain", () => {
	it.each([
		["/C=US/O=Foo, Inc./CN=Foo, Inc. CA", "Foo, Inc. CA"],
		["C=US\nO=Foo, Inc.\nCN=R3", "R3"],
		["ISRG Root X1", "ISRG Root X1"],
	])("the CN of %j is %j, whichever way the name is printed", (dn, cn) => {
		expect(commonName(dn)).toBe(cn);
	});

	it.each([
		["RSA2048", "rsa"],
		["EC256", "ec"],
		["DSA1024", "dsa"],
		["Unknown", "other"],
	])("HAProxy's algorithm %s is key type %s", (algorithm, keyType) => {
		expect(keyTypeOf(algorithm)).toBe(keyType);
	});

	it("an issuer whose CN holds a comma matches the Data Plane API's comma-joined issuers list", async () => {
		const root = await createTestCa("Foo\\, Inc. Root");
		const inter = await createTestCa("Foo\\, Inc. CA", { issuer: root });
		const leaf = await issueTestLeaf(inter, { names: ["a.test"], intermediates: [inter] });
		const bundle = parseBundle({ combined: leaf.combinedPem }, { source: "t" });
		expect(bundle.chain[0]?.subjectCn).toBe("Foo, Inc. CA");
		const listed = "Foo, Inc. Root, Foo, Inc. CA".split(",").map((s) => s.trim());
		expect(chainMatches({ kind: "issuer-cns", cns: listed }, bundle)).toBe(true);
		expect(chainMatches({ kind: "issuer-cns", cns: ["Foo", "Inc. CA"] }, bundle)).toBe(false);
		expect(
			chainMatches(
				{ kind: "names", pairs: [{ subject: "/O=x/CN=Foo, Inc. CA", issuer: "/CN=Foo, Inc. Root" }] },
				bundle,
			),
		).toBe(true);
		expect(chainMatches({ kind: "last-pair" }, bundle)).toBe(false);
	});
});
