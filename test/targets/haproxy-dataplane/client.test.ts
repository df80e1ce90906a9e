import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
	createDataplaneClient,
	type DataplaneClientHandle,
	sanitizeStorageName,
} from "../../../src/targets/haproxy-dataplane/client.js";
import {
	type DataplaneEndpointConfig,
	dataplaneEndpointSchema,
} from "../../../src/targets/haproxy-dataplane/schema.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { type DpapiDouble, startDpapiDouble } from "../../harness/dpapi-double/index.js";
import { failure } from "../../harness/failure.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";

const signal = () => AbortSignal.timeout(20_000);

function configFor(double: DpapiDouble, extra: Record<string, unknown> = {}): DataplaneEndpointConfig {
	return dataplaneEndpointSchema.parse({
		name: "dp1",
		url: double.url,
		username: double.username,
		password: double.password,
		...extra,
	});
}

let ca: TestIssuer;
let h: Haproxy;
let double: DpapiDouble;
let client: DataplaneClientHandle;
const noSleep = { sleep: async () => {}, random: () => 0.5 };

beforeAll(async () => {
	ca = await createTestCa("dataplane client test");
	const a = await issueTestLeaf(ca, { names: ["a.test"] });
	h = await startHaproxy({ crtDir: { "a.pem": a.combinedPem } });
	double = await startDpapiDouble({ haproxy: h });
	client = createDataplaneClient(configFor(double), noSleep);
});

afterEach(() => {
	double.clearFaults();
	double.assertSpecClean();
});

afterAll(async () => {
	await client?.close();
	await double?.close();
	await h?.stop();
});

describe("targets/haproxy-dataplane/client", () => {
	it("sanitises storage names like the server", () => {
		expect(sanitizeStorageName("example.com.pem")).toBe("example_com.pem");
		expect(sanitizeStorageName("a b+c.d.pem")).toBe("a_b_c_d.pem");
		expect(sanitizeStorageName("plain-name_1.pem")).toBe("plain-name_1.pem");
		expect(sanitizeStorageName("noext")).toBe("noext");
	});

	it("reads /v3/info", async () => {
		const info = await client.info(signal());
		expect(info.api?.version).toMatch(/^v3\./);
	});

	it("creates a storage file under the sanitised name, with skip_reload=true, and reads it back", async () => {
		const leaf = await issueTestLeaf(ca, { names: ["example.com", "www.example.com"] });
		const before = double.count("createStorageSSLCertificate");
		const written = await client.storage.create("example.com.pem", leaf.combinedPem, signal());
		expect(written.certificate.storage_name).toBe("example_com.pem");
		expect(written.reload).toBeUndefined();
		expect(double.count("createStorageSSLCertificate")).toBe(before + 1);
		expect(double.requests.at(-1)?.query).toBe("skip_reload=true");

		const listed = await client.storage.list(signal());
		expect(listed.map((i) => i.storageName)).toContain("example_com.pem");
		expect(listed.find((i) => i.storageName === "example_com.pem")?.file).toBe(
			join(h.crtDir, "example_com.pem"),
		);

		const meta = await client.storage.get("example_com.pem", signal());
		// Storage reports the serial in decimal.
		expect(meta.serial).toBe(BigInt(`0x${leaf.serial}`).toString(10));
		expect(meta.domains?.split(", ").sort()).toEqual(["example.com", "www.example.com"]);

		const again = await failure(client.storage.create("example.com.pem", leaf.combinedPem, signal()));
		expect(again.code).toBe("ENDPOINT_CONFLICT");
		expect(again.context).toMatchObject({
			endpoint: "dp1",
			operation: "createStorageSSLCertificate",
			status: 409,
		});
	});

	it("never sends a storage GET, PUT or DELETE for a name the server would sanitise (it would reach another file)", async () => {
		const leaf = await issueTestLeaf(ca, { names: ["dots.test"] });
		await client.storage.create("dots_x.pem", leaf.combinedPem, signal());
		const before = double.requests.length;
		for (const attempt of [
			client.storage.get("dots.x.pem", signal()),
			client.storage.replace("dots.x.pem", leaf.combinedPem, signal()),
			client.storage.delete("dots.x.pem", signal()),
		]) {
			const e = await failure(attempt);
			expect(e.code).toBe("REF_UNADDRESSABLE");
			expect(e.message).toMatch(/would address it as dots_x\.pem/);
		}
		expect(double.requests.length).toBe(before);
		// The double reproduces the hazard: the dotted name reaches the other file.
		const reached = await fetch(`${double.url}/v3/services/haproxy/storage/ssl_certificates/dots.x.pem`, {
			headers: {
				authorization: `Basic ${Buffer.from(`${double.username}:${double.password}`).toString("base64")}`,
			},
		});
		expect(((await reached.json()) as { storage_name: string }).storage_name).toBe("dots_x.pem");
		await client.storage.delete("dots_x.pem", signal());
	});

	it("the double answers set ssl cert requests of bufsize bytes as HAProxy 2.6 reacts (spin, then death; larger: closed), never sending them", async () => {
		const own = await startDpapiDouble({ haproxy: h });
		const c = createDataplaneClient(configFor(own), noSleep);
		try {
			const name = join(h.crtDir, "a.pem");
			// client-native frames it as `set severity-output number;set ssl cert <name> <<\n<pem>\n\n`.
			const frame = Buffer.byteLength(`set severity-output number;set ssl cert ${name} <<\n\n\n`);
			const exact = `${"A".repeat(16_384 - frame - 1)}\n`;
			for (const payload of [`${exact}B\n`, exact, exact]) {
				const e = await failure(c.runtime.replace(name, payload, signal()));
				expect(e.context.status).toBe(500);
			}
			expect(own.overflows.map((o) => `${o.bytes} ${o.effect}`)).toEqual([
				"16386 connection closed",
				"16384 worker spinning",
				"16384 haproxy killed",
			]);
			expect((await failure(c.runtime.list(signal()))).message).toMatch(/connection refused/);
			// The test HAProxy itself never saw them.
			expect(h.alive()).toBe(true);
			expect((await client.runtime.get(name, signal())).status).toBe("Used");
			own.assertSpecClean();
		} finally {
			await c.close();
			await own.close();
		}
	});

	it("replaces a storage file (text/plain) and never creates one with PUT", async () => {
		const v1 = await issueTestLeaf(ca, { names: ["put.test"] });
		const v2 = await issueTestLeaf(ca, { names: ["put.test"] });
		const missing = await failure(client.storage.replace("put.pem", v1.combinedPem, signal()));
		expect(missing.code).toBe("ENDPOINT_NOT_FOUND");
		expect(missing.context.status).toBe(404);
		await client.storage.create("put.pem", v1.combinedPem, signal());
		const replaced = await client.storage.replace("put.pem", v2.combinedPem, signal());
		expect(replaced.reload).toBeUndefined();
		expect(replaced.certificate.serial).toBe(BigInt(`0x${v2.serial}`).toString(10));
	});

	it("reports an invalid PEM as the server's 500, and a missing file as 404", async () => {
		const bad = await failure(client.storage.create("bad.pem", "not a pem\n", signal()));
		expect(bad.code).toBe("ENDPOINT_ERROR");
		expect(bad.context.status).toBe(500);
		expect(bad.message).toContain("file should contain both certificate and private key");
		expect((await failure(client.storage.get("nothing.pem", signal()))).code).toBe("ENDPOINT_NOT_FOUND");
	});

	it("deletes a storage file; a second delete is 404", async () => {
		const leaf = await issueTestLeaf(ca, { names: ["del.test"] });
		await client.storage.create("del.pem", leaf.combinedPem, signal());
		expect(await client.storage.delete("del.pem", signal())).toEqual({});
		expect(double.requests.at(-1)?.query).toBe("skip_reload=true");
		expect((await failure(client.storage.delete("del.pem", signal()))).code).toBe("ENDPOINT_NOT_FOUND");
	});

	it("lists and reads runtime certificates with HAProxy's hex serial and SHA-1", async () => {
		const names = await client.runtime.list(signal());
		const aPath = join(h.crtDir, "a.pem");
		expect(names).toContain(aPath);
		const meta = await client.runtime.get(aPath, signal());
		const x = new X509Certificate(await readFile(aPath, "utf8"));
		expect(meta.serial).toBe(x.serialNumber.toUpperCase());
		expect(meta.sha1_finger_print).toBe(x.fingerprint.replace(/:/g, ""));
		expect(meta.status).toBe("Used");
		expect((await failure(client.runtime.get("/nowhere/x.pem", signal()))).code).toBe("ENDPOINT_NOT_FOUND");
	});

	it("creates a runtime certificate (basename only), makes it live through a crt-list, and removes it", async () => {
		const leaf = await issueTestLeaf(ca, { names: ["rt.test"] });
		await client.runtime.create("/some/dir/rt.pem", leaf.combinedPem, signal());
		expect(await client.runtime.list(signal())).toContain("rt.pem");
		expect((await client.runtime.get("rt.pem", signal())).status).toBe("Unused");

		const lists = await client.crtLists.lists(signal());
		expect(lists).toEqual(expect.arrayContaining([h.crtDir, h.crtListPath]));
		await client.crtLists.add(h.crtListPath, { file: "rt.pem", sni_filter: ["rt.test"] }, signal());
		const entries = await client.crtLists.entries(h.crtListPath, signal());
		const entry = entries.find((e) => e.file === "rt.pem");
		expect(entry?.sni_filter).toEqual(["rt.test"]);
		expect((await client.runtime.get("rt.pem", signal())).status).toBe("Used");

		// In use: HAProxy refuses, and the server says so with a 500; the client gives it its code.
		const inUse = await failure(client.runtime.delete("rt.pem", signal()));
		expect(inUse.code).toBe("RUNTIME_CERT_IN_USE");
		expect(inUse.context.status).toBe(500);
		expect(inUse.message).toMatch(/in use/);

		await client.crtLists.delete(h.crtListPath, "rt.pem", entry?.line_number, signal());
		await client.runtime.delete("rt.pem", signal());
		expect(await client.runtime.list(signal())).not.toContain("rt.pem");
		const gone = await failure(client.crtLists.delete(h.crtListPath, "rt.pem", undefined, signal()));
		expect(gone.code).toBe("ENDPOINT_NOT_FOUND");
	});

	it("replaces a runtime certificate (multipart) and HAProxy reports the new serial", async () => {
		const aPath = join(h.crtDir, "a.pem");
		const v2 = await issueTestLeaf(ca, { names: ["a.test"] });
		await client.runtime.replace(aPath, v2.combinedPem, signal());
		expect((await client.runtime.get(aPath, signal())).serial).toBe(v2.serial);
	});

	it("scrubs the key material the server echoes in a failed runtime set", async () => {
		const leaf = await issueTestLeaf(ca, { names: ["a.test"] });
		// A key without a certificate: HAProxy refuses the `set`, and the server's message echoes the command.
		const e = await failure(client.runtime.replace(join(h.crtDir, "a.pem"), leaf.keyPem, signal()));
		expect(e.code).toBe("ENDPOINT_ERROR");
		expect(e.context.status).toBe(500);
		expect(e.message).toContain("set ssl cert");
		expect(e.message).not.toContain("PRIVATE KEY");
		const body = leaf.keyPem.split("\n")[1] ?? "";
		expect(e.message).not.toContain(body.slice(0, 20));
	});

	it("reads a duplicate runtime create as the server's 500, not the spec's 409", async () => {
		const leaf = await issueTestLeaf(ca, { names: ["dup.test"] });
		await client.runtime.create("dup.pem", leaf.combinedPem, signal());
		const e = await failure(client.runtime.create("dup.pem", leaf.combinedPem, signal()));
		expect(e.code).toBe("ENDPOINT_ERROR");
		expect(e.context.status).toBe(500);
		expect(e.message).toContain("already exists");
		await client.runtime.delete("dup.pem", signal());
	});

	// Last: it reloads the shared HAProxy.
	it("reads the worker from /runtime/info (client-native's `show info typed`); after a reload, the new one", async () => {
		const asked = await h.command("show info");
		const field = (name: string) => new RegExp(`^${name}: (.*)$`, "m").exec(asked)?.[1];
		const before = await client.processInfo(signal());
		expect(before.runtimeAPI).toBe(h.adminSocket);
		expect(before.info?.pid).toBe(Number(field("Pid")));
		expect(before.info?.node).toBe(field("Node"));
		expect(before.info?.uptime).toBeGreaterThanOrEqual(Number(field("Uptime_sec")));
		const reloaded = await h.reload();
		const after = await client.processInfo(signal());
		expect(after.info?.pid).toBe(reloaded.pid);
		expect(after.info?.pid).not.toBe(before.info?.pid);
	});

	it("runs many requests at once on one caller signal without piling listeners onto it", async () => {
		const warnings: string[] = [];
		const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
		process.on("warning", onWarning);
		const caller = new AbortController();
		try {
			const answers = await Promise.all(Array.from({ length: 40 }, () => client.info(caller.signal)));
			expect(answers).toHaveLength(40);
			// Node reports a listener leak on the next tick.
			await new Promise((resolve) => setImmediate(resolve));
		} finally {
			process.off("warning", onWarning);
		}
		expect(warnings.filter((w) => w.startsWith("MaxListenersExceededWarning"))).toEqual([]);
	});

	it("stops requests in flight when the caller's signal aborts", async () => {
		double.inject({ operation: "getInfo", kind: "latency", ms: 2_000 });
		const caller = new AbortController();
		const pending = Promise.allSettled(Array.from({ length: 3 }, () => client.info(caller.signal)));
		setTimeout(() => caller.abort(new Error("stopping")), 100);
		const results = await pending;
		// Rejected with the caller's reason, not answered after the latency and not a timeout.
		expect(results.map((r) => (r.status === "rejected" ? String(r.reason) : "answered"))).toEqual([
			"Error: stopping",
			"Error: stopping",
			"Error: stopping",
		]);
	});
});
