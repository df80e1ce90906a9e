import { describe, expect, it } from "vitest";
import { crtListMembership } from "../../../src/targets/haproxy-dataplane/crt-list-view.js";
import { joinRefs, runtimeMeta, storageMeta } from "../../../src/targets/haproxy-dataplane/observe.js";

describe("targets/haproxy-dataplane/observe", () => {
	it("normalises a storage answer: decimal serial to hex, names from domains and IPs", () => {
		expect(
			storageMeta({
				storage_name: "a.pem",
				serial: "255",
				not_after: "2027-01-01T00:00:00.000Z",
				domains: "www.A.test, a.test",
				ip_addresses: "127.0.0.1",
			}),
		).toEqual({
			serial: "FF",
			notAfter: new Date("2027-01-01T00:00:00Z"),
			names: ["127.0.0.1", "a.test", "www.a.test"],
		});
	});

	it("normalises a runtime answer: hex serial, SHA-1, status, SAN text; drops the year-1 date", () => {
		expect(
			runtimeMeta({
				storage_name: "/etc/haproxy/certs/a.pem",
				serial: "abc",
				sha1_finger_print: "59d9ff6808c8b35905d558ba0dc4669dbdb5e7fe",
				not_after: "0001-01-01T00:00:00.000Z",
				subject_alternative_names: "DNS:b.test, DNS:A.test, IP Address:10.0.0.1",
				status: "Used",
			}),
		).toEqual({
			serial: "0ABC",
			sha1: "59D9FF6808C8B35905D558BA0DC4669DBDB5E7FE",
			names: ["10.0.0.1", "a.test", "b.test"],
			status: "Used",
		});
	});

	const table: {
		name: string;
		storage: { storageName: string; file?: string }[];
		runtime: string[];
		want: { ref: string; runtimeName?: string; storage: boolean; runtime: boolean }[];
	}[] = [
		{
			name: "joins a file and the runtime certificate named by its path",
			storage: [{ storageName: "a.pem", file: "/c/a.pem" }],
			runtime: ["/c/a.pem"],
			want: [{ ref: "a.pem", runtimeName: "/c/a.pem", storage: true, runtime: true }],
		},
		{
			name: "keeps a runtime certificate whose file was deleted as a runtime-only ref (stale until reload)",
			storage: [],
			runtime: ["/c/gone.pem"],
			want: [{ ref: "gone.pem", runtimeName: "/c/gone.pem", storage: false, runtime: true }],
		},
		{
			name: "joins a bare runtime name (created through the runtime API) with the storage file of that name",
			storage: [{ storageName: "n.pem", file: "/c/n.pem" }],
			runtime: ["n.pem"],
			want: [{ ref: "n.pem", runtimeName: "n.pem", storage: true, runtime: true }],
		},
		{
			name: "keeps a runtime certificate elsewhere whose basename is taken under its full name",
			storage: [{ storageName: "a.pem", file: "/c/a.pem" }],
			runtime: ["/c/a.pem", "/other/a.pem"],
			want: [
				{ ref: "/other/a.pem", runtimeName: "/other/a.pem", storage: false, runtime: true },
				{ ref: "a.pem", runtimeName: "/c/a.pem", storage: true, runtime: true },
			],
		},
		{
			name: "lists a file HAProxy does not hold as storage-only",
			storage: [{ storageName: "new.pem", file: "/c/new.pem" }],
			runtime: [],
			want: [{ ref: "new.pem", storage: true, runtime: false }],
		},
	];

	it.each(table)("$name", ({ storage, runtime, want }) => {
		const refs = joinRefs(
			storage.map((s) => ({ ...s, meta: {} })),
			runtime.map((name) => ({ name, meta: {} })),
			new Map(),
		);
		expect(
			refs.map((r) => ({
				ref: r.ref,
				...(r.runtimeName ? { runtimeName: r.runtimeName } : {}),
				storage: r.storage !== undefined,
				runtime: r.runtime !== undefined,
			})),
		).toEqual(want);
	});

	it("lists the crt-lists that reference a runtime certificate", () => {
		const [ref] = joinRefs(
			[{ storageName: "a.pem", file: "/c/a.pem", meta: {} }],
			[{ name: "/c/a.pem", meta: {} }],
			new Map([["/c/a.pem", ["/c", "/etc/list.txt"]]]),
		);
		expect(ref?.crtLists).toEqual(["/c", "/etc/list.txt"]);
	});

	it("a crt-list named like the storage directory (with or without '/') holds every runtime certificate directly in it", () => {
		const runtime = [
			{ name: "/c/a.pem", meta: { status: "Used" } },
			{ name: "/c/sub/b.pem", meta: { status: "Used" } },
			{ name: "/c/new.pem", meta: { status: "Unused" } },
			{ name: "bare.pem", meta: { status: "Unused" } },
			{ name: "/other/d.pem", meta: { status: "Used" } },
		];
		for (const [list, storageDir] of [
			["/c", "/c"],
			["/c/", "/c"],
			["/c", "/c/"],
		] as const) {
			// The API lists the directory with no entries (client-native drops line 0).
			const members = crtListMembership([{ list, entries: [] }], runtime, storageDir);
			expect(Object.fromEntries(members), `${list} ${storageDir}`).toEqual({ "/c/a.pem": [list] });
		}
		// Entries an older server shows (line 0) and the directory rule agree: one membership, no duplicate.
		const both = crtListMembership(
			[
				{ list: "/c", entries: [{ file: "/c/a.pem" }] },
				{ list: "/etc/l.txt", entries: [{ file: "/other/d.pem" }] },
			],
			runtime,
			"/c",
		);
		expect(Object.fromEntries(both)).toEqual({ "/c/a.pem": ["/c"], "/other/d.pem": ["/etc/l.txt"] });
		// Without the storage directory only entries count.
		expect(crtListMembership([{ list: "/c", entries: [] }], runtime).size).toBe(0);
	});

	it("marks a storage name the API would sanitise as unaddressable, naming what a request would reach", () => {
		const [ref] = joinRefs(
			[
				{
					storageName: "example.com.pem",
					file: "/c/example.com.pem",
					meta: {},
					addressedAs: "example_com.pem",
				},
			],
			[{ name: "/c/example.com.pem", meta: { status: "Used" } }],
			new Map([["/c/example.com.pem", ["/c"]]]),
		);
		expect(ref).toMatchObject({
			ref: "example.com.pem",
			runtimeName: "/c/example.com.pem",
			unaddressable: { addressedAs: "example_com.pem" },
			crtLists: ["/c"],
		});
	});
});
