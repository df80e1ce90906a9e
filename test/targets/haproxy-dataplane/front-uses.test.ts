/** Where ssl-f-use lines put a certificate's files (src/targets/haproxy-dataplane/front-uses.ts). Pure. */
import { describe, expect, it } from "vitest";
import { frontendsOf, placeFrontUses } from "../../../src/targets/haproxy-dataplane/front-uses.js";
import { parseFrontUses } from "../../harness/dpapi-double/front-uses.js";

const D = "/etc/haproxy/ssl";

describe("targets/haproxy-dataplane/front-uses", () => {
	it("reads the frontends from HAProxy's implicit @<frontend> crt-lists, not crt-store names", () => {
		expect(frontendsOf(["/etc/haproxy/ssl", "@fe_tls", "@web/site-a", "/x/list.txt"])).toEqual(["fe_tls"]);
	});

	it.each([
		{
			why: "a pair in storage_dir, quoted as client-native hands it over",
			use: { certificate: `"${D}/b.crt"`, key: `"${D}/b.key"` },
			want: [
				{
					runtimeName: `${D}/b.crt`,
					frontend: "fe",
					certFile: `${D}/b.crt`,
					certRef: "b.crt",
					keyFile: `${D}/b.key`,
					keyRef: "b.key",
				},
			],
		},
		{
			why: "a combined PEM (no key argument) is an ordinary file",
			use: { certificate: `${D}/c.pem` },
			want: [],
		},
		{
			why: "a relative crt path is left to separate-keys",
			use: { certificate: "b.crt", key: "b.key" },
			want: [],
		},
		{
			why: "a key the API would sanitise, and an OCSP file",
			use: { certificate: `${D}/b.crt`, key: `${D}/b.crt.key`, ocsp: `${D}/b.ocsp` },
			want: [
				{
					runtimeName: `${D}/b.crt`,
					frontend: "fe",
					certFile: `${D}/b.crt`,
					certRef: "b.crt",
					keyFile: `${D}/b.crt.key`,
					unwritable: `the API would address b.crt.key as b_crt.key: rename it on disk; its ocsp file would be stale for a renewed certificate, and the API cannot replace it`,
				},
			],
		},
	])("$why", ({ use, want }) => {
		expect(placeFrontUses([{ frontend: "fe", uses: [use] }], `${D}/`)).toEqual(want);
	});

	it("the double reads ssl-f-use lines per frontend, quotes kept, as client-native does", () => {
		const config = [
			"frontend fe",
			"    bind :443 ssl",
			'    ssl-f-use crt "/d/b.crt" key /d/b.key alpn h2',
			"frontend other",
			"    bind :80",
			"backend be",
			"    ssl-f-use crt /nope.pem",
		].join("\n");
		const uses = parseFrontUses(config);
		expect(uses.get("fe")).toEqual([{ certificate: '"/d/b.crt"', key: "/d/b.key" }]);
		expect(uses.get("other")).toEqual([]);
		expect(uses.has("be")).toBe(false);
	});
});
