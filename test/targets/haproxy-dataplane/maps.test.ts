/**
 * The Data Plane API's runtime map endpoints, through the project's client, against the double over a real
 * HAProxy that loads the map: statuses as client-native gives them, and the challenge-map node built on them.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import { createDataplaneChallengeMaps } from "../../../src/targets/haproxy-dataplane/challenge-map.js";
import {
	createDataplaneClient,
	type DataplaneClientHandle,
} from "../../../src/targets/haproxy-dataplane/client.js";
import { dataplaneTargetSchema } from "../../../src/targets/haproxy-dataplane/schema.js";
import { type DpapiDouble, startDpapiDouble } from "../../harness/dpapi-double/index.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";

let dir: string;
let map: string;
let h: Haproxy;
let double: DpapiDouble;
let client: DataplaneClientHandle;
const signal = () => AbortSignal.timeout(10_000);
const codeOf = (e: unknown) => (isCertificateeError(e) ? e.code : String(e));

beforeAll(async () => {
	dir = await mkdtemp(path.join(tmpdir(), "certificatee-dpapi-maps-"));
	map = path.join(dir, "acme.map");
	await writeFile(map, "", { mode: 0o644 });
	h = await startHaproxy({
		extraConfig: `backend be_maps
    http-request return status 200 content-type text/plain lf-string "%[path,map(${map})]"
`,
	});
	double = await startDpapiDouble({ haproxy: h, mapsDir: dir });
	client = createDataplaneClient({
		name: "n1",
		url: double.url,
		username: double.username,
		password: double.password,
		insecure_skip_verify: false,
		timeout: 10_000,
		max_response_size: 64 * 1024 ** 2,
	});
});

afterAll(async () => {
	await client?.close();
	await double?.close();
	await h?.stop();
	await rm(dir, { recursive: true, force: true });
});

describe("Data Plane API runtime maps (double over a real HAProxy)", () => {
	it("adds, lists, refuses a second add of a key (409), deletes, clears; unknown maps and keys as the server answers", async () => {
		expect(await client.maps.entries("acme", signal())).toEqual([]);
		await client.maps.add("acme", "tok1", "tok1.thumb", signal());
		await client.maps.add("acme", "tok2", "tok2.thumb", signal());
		const listed = await client.maps.entries("acme", signal());
		expect(listed.map((e) => [e.key, e.value])).toEqual([
			["tok1", "tok1.thumb"],
			["tok2", "tok2.thumb"],
		]);
		expect(codeOf(await client.maps.add("acme", "tok1", "x", signal()).catch((e: unknown) => e))).toBe(
			"ENDPOINT_CONFLICT",
		);
		await client.maps.delete("acme", "tok1", signal());
		expect(codeOf(await client.maps.delete("acme", "tok1", signal()).catch((e: unknown) => e))).toBe(
			"ENDPOINT_NOT_FOUND",
		);
		await client.maps.clear("acme", signal());
		expect(await client.maps.entries("acme", signal())).toEqual([]);
		// A map HAProxy does not load: listing is 404, adding is HAProxy's refusal as a 400.
		expect(codeOf(await client.maps.entries("nope", signal()).catch((e: unknown) => e))).toBe(
			"ENDPOINT_NOT_FOUND",
		);
		const refused = await client.maps.add("nope", "k", "v", signal()).catch((e: unknown) => e);
		expect(codeOf(refused)).toBe("ENDPOINT_ERROR");
		expect((refused as Error).message).toContain("answered 400");
		expect((refused as Error).message).toContain("Unknown map identifier");
		// Nothing reached the file.
		expect(await readFile(map, "utf8")).toBe("");
		double.assertSpecClean();
	});

	it("a challenge-map node replaces an existing token, removes a missing one without error, and clears", async () => {
		const [node] = createDataplaneChallengeMaps(
			dataplaneTargetSchema.parse({
				name: "dp",
				type: "haproxy-dataplane",
				endpoints: [
					{
						name: "n1",
						url: double.url,
						username: double.username,
						password: double.password,
						http_address: "127.0.0.1:80",
					},
				],
			}),
			map,
		);
		try {
			expect(node?.name).toBe("dp/n1");
			await node!.set("tokA", "tokA.one", signal());
			await node!.set("tokA", "tokA.two", signal());
			expect((await client.maps.entries("acme", signal())).map((e) => e.value)).toEqual(["tokA.two"]);
			await node!.remove("tokA", signal());
			await node!.remove("tokA", signal());
			await node!.set("tokB", "tokB.x", signal());
			await node!.clear(signal());
			expect(await client.maps.entries("acme", signal())).toEqual([]);
			await expect(node!.set("bad token", "v", signal())).rejects.toThrow(/unsafe characters/);
			double.assertSpecClean();
		} finally {
			await node?.close();
		}
	});
});
