/** The pure half of placement (src/targets/haproxy/engine/placement.ts): the files of a write, and the keeper in place. */
import { describe, expect, it } from "vitest";
import type { ObservedRef, Placement } from "../../../../src/targets/haproxy/engine/model.js";
import { keeperRef, placedWrite } from "../../../../src/targets/haproxy/engine/placement.js";
import { desiredCert, metaOf } from "../../../reconcile/scenario.js";

const at = (p: Partial<Placement>): Placement => ({ via: "crt-dir", certFile: "/c/x.pem", extras: {}, ...p });

describe("placedWrite: the files of a write, by placement", () => {
	it.each<[string, Placement, ReturnType<typeof placedWrite>]>([
		[
			"a combined PEM: one file; a key left beside it goes after, stale OCSP/SCTs before",
			at({
				extras: {
					key: "/c/x.pem.key",
					ocsp: "/c/x.pem.ocsp",
					sctl: "/c/x.pem.sctl",
					issuer: "/c/x.pem.issuer",
				},
			}),
			{
				files: [{ path: "/c/x.pem", part: "combined" }],
				removeFirst: ["/c/x.pem.ocsp", "/c/x.pem.sctl"],
				removeAfter: ["/c/x.pem.key"],
				safeOrder: true,
			},
		],
		[
			"a companion key: key inside first, then the key, then the certificates alone (every state loads)",
			at({ key: { file: "/c/x.pem.key", by: "companion" }, extras: { key: "/c/x.pem.key" } }),
			{
				files: [
					{ path: "/c/x.pem", part: "combined" },
					{ path: "/c/x.pem.key", part: "key" },
					{ path: "/c/x.pem", part: "certificates" },
				],
				removeFirst: [],
				removeAfter: [],
				safeOrder: true,
			},
		],
		[
			"a key argument: the key, then the certificates; no order avoids a mismatch (journal)",
			at({ via: "crt-store", certFile: "/s/a.crt", key: { file: "/s/a.key", by: "argument" } }),
			{
				files: [
					{ path: "/s/a.key", part: "key" },
					{ path: "/s/a.crt", part: "certificates" },
				],
				removeFirst: [],
				removeAfter: [],
				safeOrder: false,
			},
		],
		[
			"HAProxy's ACME: refused",
			at({ acme: "LE" }),
			{ refused: expect.stringContaining('acme section "LE"') as unknown as string },
		],
		[
			"unknown files: refused with the reason",
			at({ unknown: "set crt_stores.web.crt_base" }),
			{ refused: "set crt_stores.web.crt_base" },
		],
	])("%s", (_, placement, expected) => {
		expect(placedWrite(placement)).toEqual(expected);
	});
});

describe("keeperRef: a desired certificate's keeper", () => {
	it("is the crt-store or ssl-f-use ref HAProxy loads with the same names and key type, unless the canonical ref is loaded; never one taken", async () => {
		const d = await desiredCert("a", ["a.lay.test"]);
		const store: ObservedRef = {
			ref: "@web/site-a",
			runtimeName: "@web/site-a",
			runtime: metaOf(d),
			crtLists: [],
			placement: at({ via: "crt-store", certFile: "/s/a.crt" }),
		};
		const refs = new Map([[store.ref, store]]);
		expect(keeperRef("a.pem", d, refs, new Set())).toBe("@web/site-a");
		expect(keeperRef("a.pem", d, refs, new Set(["@web/site-a"]))).toBe("a.pem");
		const loaded: ObservedRef = { ref: "a.pem", runtime: metaOf(d), crtLists: ["/c"] };
		expect(keeperRef("a.pem", d, new Map([...refs, ["a.pem", loaded]]), new Set())).toBe("a.pem");
		const other = await desiredCert("a", ["a.lay.test", "www.a.lay.test"]);
		expect(keeperRef("a.pem", other, refs, new Set())).toBe("a.pem");
		const rsa = await desiredCert("a", ["a.lay.test"], { keyType: "rsa-2048" });
		expect(keeperRef("a.pem", rsa, refs, new Set())).toBe("a.pem");
	});
});
