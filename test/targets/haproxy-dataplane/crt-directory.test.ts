/**
 * A `crt <dir>` directory through the Data Plane API. HAProxy prints the directory's members as `<path>:0`;
 * current client-native drops entries whose line number is below 1 (the API lists the directory as a crt-list
 * with no entries), older client-native returned them with line_number 0. The double does either; the driver
 * sees every member in both cases, and removes one without a line number.
 */
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { probeServed } from "../../../src/probe/index.js";
import type { EndpointObservation } from "../../../src/targets/haproxy/engine/model.js";
import {
	createDataplaneClient,
	type DataplaneClientHandle,
} from "../../../src/targets/haproxy-dataplane/client.js";
import {
	createDataplaneEndpoint,
	type DataplaneEndpoint,
} from "../../../src/targets/haproxy-dataplane/index.js";
import { dataplaneEndpointSchema } from "../../../src/targets/haproxy-dataplane/schema.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";
import { type DpapiDouble, startDpapiDouble } from "../../harness/dpapi-double/index.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { assertReloadSafe } from "../../harness/invariant.js";

const signal = () => AbortSignal.timeout(20_000);
let h: Haproxy;
const doubles: Record<"current" | "older", DpapiDouble> = {} as never;
const clients: Record<"current" | "older", DataplaneClientHandle> = {} as never;
const drivers: Record<"current" | "older", DataplaneEndpoint> = {} as never;

beforeAll(async () => {
	const ca = await createTestCa("crt directory test");
	const leaf = async (n: string) => (await issueTestLeaf(ca, { names: [`${n}.test`] })).combinedPem;
	h = await startHaproxy({
		crtDir: { "a.pem": await leaf("a"), "b.pem": await leaf("b") },
		crtList: [{ file: "l1.pem", pem: await leaf("l1") }],
	});
	for (const kind of ["current", "older"] as const) {
		const d = await startDpapiDouble({ haproxy: h, lineZeroEntries: kind === "older" });
		const config = dataplaneEndpointSchema.parse({
			name: `dp-${kind}`,
			url: d.url,
			username: d.username,
			password: d.password,
		});
		doubles[kind] = d;
		clients[kind] = createDataplaneClient(config);
		drivers[kind] = createDataplaneEndpoint(config, { now: () => new Date(), storageDir: h.crtDir });
	}
});

afterEach(() => {
	for (const d of Object.values(doubles)) d.assertSpecClean();
});

afterAll(async () => {
	for (const c of Object.values(clients)) await c.close();
	for (const e of Object.values(drivers)) await e.close();
	for (const d of Object.values(doubles)) await d.close();
	await h?.stop();
});

const refsOf = (o: EndpointObservation) => {
	if (!o.ok) throw o.error;
	return o.refs;
};

describe("targets/haproxy-dataplane: crt directories", () => {
	it("current servers list the directory as a crt-list with no entries (line 0 dropped); crt-list files keep theirs", async () => {
		const c = clients.current;
		expect(await c.crtLists.lists(signal())).toEqual(expect.arrayContaining([h.crtDir, h.crtListPath]));
		// HAProxy itself holds both members.
		expect((await doubles.current.runtime.showCrtList(h.crtDir))?.map((e) => e.file).sort()).toEqual([
			join(h.crtDir, "a.pem"),
			join(h.crtDir, "b.pem"),
		]);
		expect(await c.crtLists.entries(h.crtDir, signal())).toEqual([]);
		expect(await c.crtLists.entries(h.crtListPath, signal())).toEqual([
			{ file: join(h.dir, "list", "l1.pem"), line_number: 1 },
		]);
		await assertReloadSafe(h);
	});

	it("older servers list the directory's members with line_number 0", async () => {
		const entries = await clients.older.crtLists.entries(h.crtDir, signal());
		expect(entries.map((e) => `${e.file}:${e.line_number}`).sort()).toEqual([
			`${join(h.crtDir, "a.pem")}:0`,
			`${join(h.crtDir, "b.pem")}:0`,
		]);
		await assertReloadSafe(h);
	});

	it.each(["current", "older"] as const)(
		"the driver sees every directory member in the directory's crt-list (%s server)",
		async (kind) => {
			const refs = refsOf(await drivers[kind].observe(signal()));
			const lists = Object.fromEntries(refs.map((r) => [r.ref, r.crtLists]));
			expect(lists["a.pem"]).toEqual([h.crtDir]);
			expect(lists["b.pem"]).toEqual([h.crtDir]);
			expect(lists["l1.pem"]).toEqual([h.crtListPath]);
			await assertReloadSafe(h);
		},
	);

	it("a member leaves without a line number (del ssl crt-list <dir> <path>), then runtime, then storage: reload-safe", async () => {
		const c = clients.current;
		const b = join(h.crtDir, "b.pem");
		await c.crtLists.delete(h.crtDir, b, undefined, signal());
		const del = doubles.current.requests.find((r) => r.operation === "deleteCrtListEntry");
		expect(new URLSearchParams(del?.query).get("line_number")).toBeNull();
		await c.runtime.delete(b, signal());
		await c.storage.delete("b.pem", signal());
		expect((await doubles.current.runtime.showCerts()).names).not.toContain(b);
		expect((await probeServed({ address: h.address, sni: "b.test" })).names).toEqual(["default.invalid"]);
		await assertReloadSafe(h, { names: ["b.test"] });
	});
});
