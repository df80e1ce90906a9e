import { describe, expect, it } from "vitest";
import { groupFiles } from "../../../src/sources/directory/files.js";

describe("sources/directory/files", () => {
	it("groups combined files and crt/key(/chain) pairs by stem", () => {
		const { candidates, problems } = groupFiles([
			"a.pem",
			"b.crt",
			"b.key",
			"b.chain.pem",
			"c.crt",
			"c.key",
			".hidden.pem",
			"notes.txt",
		]);
		expect(candidates).toEqual([
			{ name: "a", kind: "combined", file: "a.pem" },
			{ name: "b", kind: "split", cert: "b.crt", key: "b.key", chain: "b.chain.pem" },
			{ name: "c", kind: "split", cert: "c.crt", key: "c.key" },
		]);
		expect(problems).toEqual([]);
	});

	it.each([
		[["x.crt"], "x.crt", "BUNDLE_NO_KEY"],
		[["x.key"], "x.key", "BUNDLE_NO_CERTIFICATE"],
		[["x.chain.pem"], "x.chain.pem", "BUNDLE_NO_CERTIFICATE"],
		[["x.pem", "x.crt", "x.key"], "x.crt", "SOURCE_DUPLICATE_NAME"],
	])("reports %j: %s %s", (files, file, code) => {
		const { problems } = groupFiles(files);
		expect(problems.map((p) => [p.file, p.code])).toEqual([[file, code]]);
	});
});
