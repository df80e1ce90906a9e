import { describe, expect, it } from "vitest";
import {
	appendLine,
	crtListLine,
	isCrtDirectory,
	linePath,
	linesByCertificate,
	linesMaybeNaming,
	namesCertificate,
	removeCertificateLines,
} from "../../../src/targets/haproxy/crt-list.js";

const LIST = "/etc/haproxy/certs.list";
const ctx = { listPath: LIST };

describe("targets/haproxy/crt-list: removing the lines that name a certificate", () => {
	const cases: Array<{
		name: string;
		text: string;
		cert: string;
		crtBase?: string;
		want: string;
		removed: string[];
	}> = [
		{
			name: "options, filters, comments and blank lines around it stay byte for byte",
			text: "# edge certs\n/ssl/a.pem [alpn h2,http/1.1 ssl-min-ver TLSv1.2] a.test !b.a.test\n\n/ssl/dup.pem [ocsp-update off] dup.test *.dup.test\n  # indented comment /ssl/dup.pem\n/ssl/z.pem\n",
			cert: "/ssl/dup.pem",
			want: "# edge certs\n/ssl/a.pem [alpn h2,http/1.1 ssl-min-ver TLSv1.2] a.test !b.a.test\n\n  # indented comment /ssl/dup.pem\n/ssl/z.pem\n",
			removed: ["/ssl/dup.pem [ocsp-update off] dup.test *.dup.test"],
		},
		{
			name: "every line naming it goes (a certificate listed twice with different filters)",
			text: "/ssl/dup.pem a.test\n/ssl/k.pem\n/ssl/dup.pem [alpn h2] b.test\n",
			cert: "/ssl/dup.pem",
			want: "/ssl/k.pem\n",
			removed: ["/ssl/dup.pem a.test", "/ssl/dup.pem [alpn h2] b.test"],
		},
		{
			name: "a path that only starts like it is another certificate",
			text: "/ssl/dup.pem.old\n/ssl/dup.pem2 x.test\n",
			cert: "/ssl/dup.pem",
			want: "/ssl/dup.pem.old\n/ssl/dup.pem2 x.test\n",
			removed: [],
		},
		{
			name: "last line without a final newline: the result has none either",
			text: "/ssl/a.pem\n/ssl/dup.pem",
			cert: "/ssl/dup.pem",
			want: "/ssl/a.pem",
			removed: ["/ssl/dup.pem"],
		},
		{
			name: "a middle line of a file without a final newline",
			text: "/ssl/dup.pem\n/ssl/a.pem",
			cert: "/ssl/dup.pem",
			want: "/ssl/a.pem",
			removed: ["/ssl/dup.pem"],
		},
		{
			name: "CRLF line endings stay CRLF",
			text: "# c\r\n/ssl/dup.pem x.test\r\n/ssl/a.pem\r\n",
			cert: "/ssl/dup.pem",
			want: "# c\r\n/ssl/a.pem\r\n",
			removed: ["/ssl/dup.pem x.test"],
		},
		{
			name: "a relative path resolved against crt-base",
			text: "dup.pem [alpn h2]\nother/dup.pem\n",
			cert: "/etc/ssl/dup.pem",
			crtBase: "/etc/ssl",
			want: "other/dup.pem\n",
			removed: ["dup.pem [alpn h2]"],
		},
		{
			name: "a relative path resolved against the list's directory",
			text: "certs/dup.pem\n",
			cert: "/etc/haproxy/certs/dup.pem",
			want: "",
			removed: ["certs/dup.pem"],
		},
		{
			name: "an absolute path spelled with a double slash",
			text: "/ssl//dup.pem\n",
			cert: "/ssl/dup.pem",
			want: "",
			removed: ["/ssl//dup.pem"],
		},
		{ name: "empty file", text: "", cert: "/ssl/dup.pem", want: "", removed: [] },
	];
	it.each(cases)("$name", ({ text, cert, crtBase, want, removed }) => {
		const context = { listPath: LIST, ...(crtBase ? { crtBase } : {}) };
		const edit = removeCertificateLines(text, cert, context);
		expect(edit.text).toBe(want);
		expect(edit.removed).toEqual(removed);
		if (removed.length === 0) expect(edit.text).toBe(text);
		// The one-pass index used by observe agrees with the edit.
		expect(linesByCertificate(text, context).get(cert) ?? []).toEqual(removed);
	});
});

describe("targets/haproxy/crt-list: appending a line", () => {
	it.each([
		{ text: "", want: "/ssl/n.pem\n" },
		{ text: "# c\n/ssl/a.pem [alpn h2] a.test\n", want: "# c\n/ssl/a.pem [alpn h2] a.test\n/ssl/n.pem\n" },
		{ text: "/ssl/a.pem", want: "/ssl/a.pem\n/ssl/n.pem" },
		{ text: "/ssl/a.pem\r\n", want: "/ssl/a.pem\r\n/ssl/n.pem\r\n" },
		{ text: "/ssl/a.pem\n\n", want: "/ssl/a.pem\n\n/ssl/n.pem\n" },
	])("appends to $text", ({ text, want }) => {
		expect(appendLine(text, "/ssl/n.pem")).toBe(want);
	});

	it("builds a line from path, options and filters", () => {
		expect(crtListLine({ file: "/ssl/n.pem" })).toBe("/ssl/n.pem");
		expect(crtListLine({ file: "/ssl/n.pem", options: "alpn h2", filters: ["a.test", "!b.test"] })).toBe(
			"/ssl/n.pem [alpn h2] a.test !b.test",
		);
	});
});

describe("targets/haproxy/crt-list: reading", () => {
	it.each([
		{ line: "/ssl/a.pem [alpn h2] a.test", want: "/ssl/a.pem" },
		{ line: "  /ssl/a.pem\r\n", want: "/ssl/a.pem" },
		{ line: "# /ssl/a.pem", want: undefined },
		{ line: "  # /ssl/a.pem", want: "#" },
		{ line: "   ", want: undefined },
	])("linePath($line)", ({ line, want }) => {
		expect(linePath(line)).toBe(want);
	});

	it("matches exact, normalised absolute and resolved relative paths only", () => {
		expect(namesCertificate("/ssl/a.pem", "/ssl/a.pem", ctx)).toBe(true);
		expect(namesCertificate("/ssl/./a.pem", "/ssl/a.pem", ctx)).toBe(true);
		expect(namesCertificate("a.pem", "/ssl/a.pem", ctx)).toBe(false);
		expect(namesCertificate("a.pem", "/ssl/a.pem", { ...ctx, crtBase: "/ssl" })).toBe(true);
		expect(namesCertificate("a.pem", "a.pem", ctx)).toBe(true);
	});

	it("before a delete, a relative line with the same file name counts unless crt-base resolves it", () => {
		const text = "# dup.pem\nother/dup.pem [alpn h2]\n/ssl/dup.pem\n/elsewhere/dup.pem\nkeep.pem\n";
		expect(linesMaybeNaming(text, "/ssl/dup.pem", ctx)).toEqual(["other/dup.pem [alpn h2]", "/ssl/dup.pem"]);
		expect(linesMaybeNaming(text, "/ssl/dup.pem", { ...ctx, crtBase: "/base" })).toEqual(["/ssl/dup.pem"]);
	});

	it("tells crt directories from crt-list files", () => {
		expect(isCrtDirectory("/etc/haproxy/ssl", [{ file: "/etc/haproxy/ssl/a.pem" }])).toBe(true);
		expect(isCrtDirectory("/etc/haproxy/ssl", [], ["/etc/haproxy/ssl/"])).toBe(true);
		expect(isCrtDirectory("/etc/haproxy/certs.list", [{ file: "/etc/haproxy/ssl/a.pem" }])).toBe(false);
		expect(isCrtDirectory("/etc/haproxy/ssl", [{ file: "/etc/haproxy/ssl2/a.pem" }])).toBe(false);
	});
});
