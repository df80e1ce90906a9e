import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ErrorCode } from "../../../src/errors.js";
import {
	createDataplaneClient,
	type DataplaneClientHandle,
} from "../../../src/targets/haproxy-dataplane/client.js";
import { dataplaneEndpointSchema } from "../../../src/targets/haproxy-dataplane/schema.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../harness/certs.js";
import { type DpapiDouble, type FaultKind, startDpapiDouble } from "../../harness/dpapi-double/index.js";
import { failure } from "../../harness/failure.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";

const signal = () => AbortSignal.timeout(20_000);

let ca: TestIssuer;
let leaf: TestLeaf;
let h: Haproxy;
let double: DpapiDouble;
let client: DataplaneClientHandle;
/** A short timeout, for the "no answer" fault only (other tests keep 5 s: the test machine may be busy). */
let impatient: DataplaneClientHandle;
const clients: DataplaneClientHandle[] = [];
const sleeps: number[] = [];

function newClient(extra: Record<string, unknown> = {}, url = double.url): DataplaneClientHandle {
	const c = createDataplaneClient(
		dataplaneEndpointSchema.parse({
			name: "dp-faults",
			url,
			username: double.username,
			password: double.password,
			timeout: "5s",
			...extra,
		}),
		{
			sleep: async (ms) => {
				sleeps.push(ms);
			},
			random: () => 0.5,
		},
	);
	clients.push(c);
	return c;
}

beforeAll(async () => {
	ca = await createTestCa("dataplane faults test");
	leaf = await issueTestLeaf(ca, { names: ["f.test"] });
	h = await startHaproxy({ crtDir: { "f.pem": leaf.combinedPem } });
	double = await startDpapiDouble({ haproxy: h });
	client = newClient();
	impatient = newClient({ timeout: "300ms" });
});

afterEach(() => {
	double.clearFaults();
	double.assertSpecClean();
});

afterAll(async () => {
	for (const c of clients) await c.close();
	await double?.close();
	await h?.stop();
});

/** Each fault on a read and on a write: the typed error, and how many requests the server saw. */
const table: { fault: FaultKind; code: ErrorCode; readCalls: number; writeCalls: number; status?: number }[] =
	[
		{ fault: { kind: "status500" }, code: "ENDPOINT_ERROR", readCalls: 3, writeCalls: 1, status: 500 },
		{ fault: { kind: "status401" }, code: "ENDPOINT_AUTH", readCalls: 1, writeCalls: 1, status: 401 },
		{ fault: { kind: "timeout" }, code: "ENDPOINT_TIMEOUT", readCalls: 3, writeCalls: 1 },
		{ fault: { kind: "reset" }, code: "ENDPOINT_UNAVAILABLE", readCalls: 3, writeCalls: 1 },
		{ fault: { kind: "html" }, code: "ENDPOINT_BAD_RESPONSE", readCalls: 1, writeCalls: 1, status: 200 },
		{
			fault: { kind: "html", status: 502 },
			code: "ENDPOINT_ERROR",
			readCalls: 3,
			writeCalls: 1,
			status: 502,
		},
		{ fault: { kind: "truncated" }, code: "ENDPOINT_BAD_RESPONSE", readCalls: 1, writeCalls: 1, status: 200 },
		{
			fault: { kind: "wrong-shape" },
			code: "ENDPOINT_BAD_RESPONSE",
			readCalls: 1,
			writeCalls: 1,
			status: 200,
		},
	];

describe("targets/haproxy-dataplane/client faults", () => {
	it.each(table)(
		"$fault.kind $fault.status: $code; reads tried $readCalls times, writes $writeCalls",
		async (row) => {
			const read = "getAllStorageSSLCertificates";
			double.inject({ ...row.fault, operation: read });
			const c = row.fault.kind === "timeout" ? impatient : client;
			const before = double.count(read);
			const r = await failure(c.storage.list(signal()));
			expect(r.code).toBe(row.code);
			expect(r.context).toMatchObject({ endpoint: "dp-faults", operation: read });
			if (row.status !== undefined) expect(r.context.status).toBe(row.status);
			expect(double.count(read) - before).toBe(row.readCalls);

			const write = "replaceStorageSSLCertificate";
			double.inject({ ...row.fault, operation: write });
			const w0 = double.count(write);
			const w = await failure(c.storage.replace("f.pem", leaf.combinedPem, signal()));
			expect(w.code).toBe(row.code);
			expect(w.context.operation).toBe(write);
			expect(double.count(write) - w0).toBe(row.writeCalls);
		},
	);

	it("does not take a proxy's HTML page for a runtime write's empty answer", async () => {
		double.inject({ kind: "html", operation: "replaceCert" });
		const e = await failure(client.runtime.replace(join(h.crtDir, "f.pem"), leaf.combinedPem, signal()));
		expect(e.code).toBe("ENDPOINT_BAD_RESPONSE");
		expect(e.context).toMatchObject({ operation: "replaceCert", status: 200 });
	});

	it("retries a read that fails once and returns its answer; waits with growing jittered backoff", async () => {
		double.inject({ kind: "status500", operation: "getAllCerts", times: 2 });
		sleeps.length = 0;
		const before = double.count("getAllCerts");
		expect(await client.runtime.list(signal())).toContain(join(h.crtDir, "f.pem"));
		expect(double.count("getAllCerts") - before).toBe(3);
		expect(sleeps).toEqual([200, 400]);
	});

	it("fires a fault on a chosen call number only", async () => {
		const n = double.count("getInfo");
		double.inject({ kind: "status401", operation: "getInfo", call: n + 2 });
		await client.info(signal());
		expect((await failure(client.info(signal()))).code).toBe("ENDPOINT_AUTH");
		await client.info(signal());
	});

	it("waits out latency below the timeout", async () => {
		double.inject({ kind: "latency", ms: 150, operation: "getInfo" });
		const t0 = performance.now();
		await client.info(signal());
		expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
	});

	it("retries a write only when the server surely did nothing (connection refused)", async () => {
		const dead = newClient({}, "http://127.0.0.1:1");
		const e = await failure(dead.storage.replace("f.pem", leaf.combinedPem, signal()));
		expect(e.code).toBe("ENDPOINT_UNAVAILABLE");
		expect(e.retryable).toBe(true);
		expect(e.message).toContain("ECONNREFUSED");
	});

	it("retries a write that HAProxy refused because its certificate lock was held", async () => {
		double.inject({
			kind: "status500",
			operation: "replaceCert",
			times: 1,
			message: "Can't update: Operations on certificates are currently locked!",
		});
		const before = double.count("replaceCert");
		await client.runtime.replace(join(h.crtDir, "f.pem"), leaf.combinedPem, signal());
		expect(double.count("replaceCert") - before).toBe(2);
	});

	it("answers a wrong password with ENDPOINT_AUTH and a hint", async () => {
		const wrong = newClient({ password: "nope" });
		const e = await failure(wrong.info(signal()));
		expect(e.code).toBe("ENDPOINT_AUTH");
		expect(e.hint).toMatch(/username and password/);
		expect(e.message).not.toContain("nope");
	});

	it("runs one certificate write at a time per endpoint", async () => {
		const a = await issueTestLeaf(ca, { names: ["f.test"] });
		double.inject({ kind: "latency", ms: 200, operation: "replaceStorageSSLCertificate", times: 1 });
		const start = double.requests.length;
		await Promise.all([
			client.storage.replace("f.pem", a.combinedPem, signal()),
			client.runtime.replace(join(h.crtDir, "f.pem"), a.combinedPem, signal()),
			client.storage.replace("f.pem", a.combinedPem, signal()),
		]);
		const writes = double.requests.slice(start);
		expect(writes.map((r) => r.operation)).toEqual([
			"replaceStorageSSLCertificate",
			"replaceCert",
			"replaceStorageSSLCertificate",
		]);
		for (let i = 1; i < writes.length; i++) {
			expect(writes[i]!.startedAt).toBeGreaterThanOrEqual(writes[i - 1]!.endedAt!);
		}
	});

	it("reports a 202 + Reload-ID as a reload caused (server ignoring skip_reload)", async () => {
		const old = await startDpapiDouble({ haproxy: h, ignoreSkipReload: true });
		try {
			const c = newClient({}, old.url);
			const extra = await issueTestLeaf(ca, { names: ["r.test"] });
			await c.storage.create("r.pem", extra.combinedPem, signal());
			// The runtime push succeeds for a create (new/set/commit on the full path): no reload.
			// A delete sends HAProxy the bare name, which it does not know: a reload is scheduled.
			const deleted = await c.storage.delete("r.pem", signal());
			expect(deleted.reload?.reloadId).toMatch(/^\d{4}-\d\d-\d\d-\d+$/);
			expect(old.scheduledReloads).toEqual([deleted.reload?.reloadId]);
			old.assertSpecClean();
		} finally {
			await old.close();
		}
	});
});

describe("targets/haproxy-dataplane/client HTTPS", () => {
	it("verifies the server against ca_file, refuses without it, and skips only when told (with a warning)", async () => {
		const serverCa = await createTestCa("dpapi https ca");
		const serverLeaf = await issueTestLeaf(serverCa, { names: ["127.0.0.1"] });
		const tlsDouble = await startDpapiDouble({
			haproxy: h,
			tls: { certPem: serverLeaf.certPem, keyPem: serverLeaf.keyPem },
		});
		try {
			const caFile = join(h.dir, "dpapi-ca.pem");
			await writeFile(caFile, serverCa.certPem);
			const verified = newClient({ ca_file: caFile }, tlsDouble.url);
			expect((await verified.info(signal())).api?.version).toBeDefined();

			const before = tlsDouble.count("getInfo");
			const unverified = newClient({}, tlsDouble.url);
			const e = await failure(unverified.info(signal()));
			expect(e.code).toBe("ENDPOINT_UNAVAILABLE");
			expect(e.message).toMatch(/verification failed/);
			expect(e.hint).toMatch(/ca_file/);
			expect(tlsDouble.count("getInfo")).toBe(before);

			const warnings: string[] = [];
			const insecure = createDataplaneClient(
				dataplaneEndpointSchema.parse({
					name: "dp-insecure",
					url: tlsDouble.url,
					username: double.username,
					password: double.password,
					insecure_skip_verify: true,
				}),
				{ warn: (_f, m) => warnings.push(m) },
			);
			clients.push(insecure);
			expect(warnings).toHaveLength(1);
			expect(warnings[0]).toMatch(/not verified/);
			await insecure.info(signal());
			tlsDouble.assertSpecClean();
		} finally {
			await tlsDouble.close();
		}
	});

	it("names an unreadable ca_file as a config error", () => {
		expect(() => newClient({ ca_file: "/nonexistent/ca.pem" })).toThrow(/cannot read ca_file/);
	});
});

describe("test/harness/dpapi-double spec validation", () => {
	it("rejects off-spec requests and records them", async () => {
		const auth = `Basic ${Buffer.from(`${double.username}:${double.password}`).toString("base64")}`;
		const put = await fetch(
			`${double.url}/v3/services/haproxy/storage/ssl_certificates/f.pem?skip_reload=true`,
			{
				method: "PUT",
				headers: { authorization: auth, "content-type": "application/json" },
				body: JSON.stringify({ pem: await readFile(join(h.crtDir, "f.pem"), "utf8") }),
			},
		);
		expect(put.status).toBe(415);
		const badQuery = await fetch(
			`${double.url}/v3/services/haproxy/storage/ssl_certificates/f.pem?skip_reload=maybe`,
			{
				method: "DELETE",
				headers: { authorization: auth },
			},
		);
		expect(badQuery.status).toBe(400);
		const badEntry = await fetch(`${double.url}/v3/services/haproxy/runtime/ssl_crt_lists/entries?name=x`, {
			method: "POST",
			headers: { authorization: auth, "content-type": "application/json" },
			body: JSON.stringify({ file: 42 }),
		});
		expect(badEntry.status).toBe(422);
		const noPart = await fetch(`${double.url}/v3/services/haproxy/runtime/ssl_certs`, {
			method: "POST",
			headers: { authorization: auth },
			body: new FormData(),
		});
		expect(noPart.status).toBe(400);
		expect(double.violations).toHaveLength(4);
		expect(() => double.assertSpecClean()).toThrow(/strayed from the spec/);
		double.violations.length = 0;
		// The file survived the rejected requests.
		expect(await readFile(join(h.crtDir, "f.pem"), "utf8")).toContain("BEGIN CERTIFICATE");
	});
});
