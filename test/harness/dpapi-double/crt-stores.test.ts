/**
 * The double's crt-store endpoints, and what its runtime and storage endpoints answer for certificates a
 * crt-store loads, against real HAProxy 3.0, 3.2 and 3.4 (the builds of the matrix, haproxy-builds.ts; with an
 * HAPROXY_BIN of 2.x, where crt-store does not exist, one more test asserts that HAProxy refuses the section). Expected answers: docs/haproxy-dataplane-target.md,
 * "crt-stores (HAProxy 3.x)".
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial } from "../../../src/certificates/index.js";
import { probeServed } from "../../../src/probe/index.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../certs.js";
import { freePort, HAPROXY_BIN, type Haproxy, startHaproxy } from "../haproxy.js";
import { haproxyBuilds, versionOf } from "../haproxy-builds.js";
import { parseCrtStores, splitLine } from "./crt-stores.js";
import { type DpapiDouble, startDpapiDouble } from "./index.js";

const run = promisify(execFile);

const own = versionOf(HAPROXY_BIN) ?? "0.0.0";

describe("test/harness/dpapi-double crt-store parsing (client-native's config-parser)", () => {
	it("splits lines as client-native does: quotes kept, escapes, comments", () => {
		expect(splitLine('  load crt "a b.crt" key \'k.key\' # {"x":1}')).toEqual({
			parts: ["load", "crt", '"a b.crt"', "key", "'k.key'"],
			comment: '{"x":1}',
		});
		expect(splitLine("crt-base /a\\ b\t# c")).toEqual({ parts: ["crt-base", "/a\\ b"], comment: "c" });
		expect(splitLine('load crt "a#b.pem"')).toEqual({ parts: ["load", "crt", '"a#b.pem"'], comment: "" });
	});

	it("reads stores, bases and loads with every keyword, in file order", () => {
		const config = [
			"global",
			"    crt-base /ignored",
			'crt-store web # {"owner":"ops"}',
			"    crt-base /etc/ssl/web",
			'    key-base "/etc/ssl/keys"',
			'    load key "a.key" crt "a.crt" alias "site-a" ocsp-update on',
			"    load crt c.pem ocsp c.ocsp issuer c.issuer sctl c.sctl # note",
			"    load crt",
			"crt-store",
			'    load crt "/abs/e.pem" alias "anon"',
			'crt-store "quoted"',
			"    load crt q.pem",
			"crt-store acme",
			'    load crt "d.pem" acme LE domains "d.test,www.d.test"',
			"frontend fe",
			"    load crt not-a-store.pem x",
		].join("\n");
		expect(parseCrtStores(config)).toEqual([
			{
				name: "web",
				metadata: { owner: "ops" },
				crt_base: "/etc/ssl/web",
				key_base: '"/etc/ssl/keys"',
				loads: [
					{ key: '"a.key"', certificate: '"a.crt"', alias: '"site-a"', ocsp_update: "enabled" },
					{
						certificate: "c.pem",
						ocsp: "c.ocsp",
						issuer: "c.issuer",
						sctl: "c.sctl",
						metadata: { comment: "note" },
					},
				],
			},
			{ name: "", loads: [{ certificate: '"/abs/e.pem"', alias: '"anon"' }] },
			{ name: "acme", loads: [{ certificate: '"d.pem"', acme: "LE", domains: ['"d.test', 'www.d.test"'] }] },
		]);
	});
});

let ca: TestIssuer;
let site: TestLeaf;
let combined: TestLeaf;
const dirs: string[] = [];

beforeAll(async () => {
	ca = await createTestCa("crt-store double test");
	site = await issueTestLeaf(ca, { names: ["site-a.test"] });
	combined = await issueTestLeaf(ca, { names: ["c.test"] });
});

afterAll(async () => {
	for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** A store directory of its own (a test renews c.pem in it). */
async function storeFiles(): Promise<string> {
	const storeDir = await mkdtemp(join(tmpdir(), "certificatee-store-"));
	dirs.push(storeDir);
	await writeFile(join(storeDir, "a.crt"), site.certPem + site.chainPem, { mode: 0o600 });
	await writeFile(join(storeDir, "a.key"), site.keyPem, { mode: 0o600 });
	await writeFile(join(storeDir, "c.pem"), combined.combinedPem, { mode: 0o600 });
	await writeFile(join(storeDir, "e.pem"), combined.combinedPem, { mode: 0o600 });
	return storeDir;
}

/** A second TLS frontend: it references every load, so each is Used. */
const storeConfig = (dir: string, port: number) =>
	[
		"crt-store web",
		`    crt-base ${dir}`,
		`    key-base ${dir}`,
		'    load crt "a.crt" key "a.key" alias "site-a"',
		'    load crt "c.pem"',
		"crt-store empty",
		`    crt-base ${dir}`,
		"crt-store",
		`    load crt "${join(dir, "e.pem")}" alias "anon"`,
		"frontend fe_store",
		`    bind 127.0.0.1:${port} ssl crt "@web/site-a" crt "@web/c.pem" crt "@/anon"`,
		'    http-request return status 200 content-type text/plain string "store\\n"',
	].join("\n");

// HAPROXY_BIN of 2.x: the layout cannot exist there. The 3.x builds of the matrix serve it below.
if (Number(own.split(".")[0]) < 3) {
	describe(`test/harness/dpapi-double crt-stores on HAProxy ${own}`, () => {
		it(`HAProxy ${own} has no crt-store section: the layout cannot exist there`, async () => {
			const dir = await mkdtemp(join(tmpdir(), "certificatee-nostore-"));
			try {
				const cfg = join(dir, "haproxy.cfg");
				await writeFile(cfg, `${storeConfig(await storeFiles(), 1)}\n`);
				const failed = await run(HAPROXY_BIN, ["-c", "-f", cfg]).then(
					() => "",
					(e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ""}${e.stderr ?? ""}`,
				);
				expect(failed).toMatch(/unknown keyword 'crt-store'|crt-store/);
			} finally {
				await rm(dir, { recursive: true, force: true });
			}
		});
	});
}
for (const build of haproxyBuilds(["3.0", "3.2", "3.4"])) {
	const [, minor] = build.version.split(".").map(Number) as [number, number];
	/** 3.2+ prints `Crt filename` / `Key filename` in `show ssl cert <name>`. */
	const printsFilenames = minor >= 2;
	describe(`test/harness/dpapi-double crt-stores against HAProxy ${build.version}`, () => {
		let h: Haproxy;
		let double: DpapiDouble;
		let port: number;
		let storeDir: string;

		beforeAll(async () => {
			storeDir = await storeFiles();
			port = await freePort();
			h = await startHaproxy({ bin: build.bin, extraConfig: storeConfig(storeDir, port) });
			double = await startDpapiDouble({ haproxy: h, storageDir: storeDir });
		});

		afterAll(async () => {
			await double?.close();
			await h?.stop();
		});

		async function api(
			method: string,
			path: string,
			body?: { type: string; data: string },
		): Promise<{ status: number; body: unknown; headers: Headers }> {
			const res = await fetch(`${double.url}/v3${path}`, {
				method,
				headers: {
					authorization: `Basic ${Buffer.from(`${double.username}:${double.password}`).toString("base64")}`,
					...(body ? { "content-type": body.type } : {}),
				},
				...(body ? { body: body.data } : {}),
			});
			const text = await res.text();
			return { status: res.status, body: text === "" ? undefined : JSON.parse(text), headers: res.headers };
		}
		const CONF = "/services/haproxy/configuration/crt_stores";

		it("lists the stores of the running configuration, each without its loads", async () => {
			const listed = await api("GET", CONF);
			expect(listed.status).toBe(200);
			const byName = (listed.body as { name: string }[]).sort((a, b) => a.name.localeCompare(b.name));
			expect(byName).toEqual([
				{ name: "" },
				{ name: "empty", crt_base: storeDir },
				{ name: "web", crt_base: storeDir, key_base: storeDir },
			]);
			expect(await api("GET", `${CONF}/web`)).toMatchObject({
				status: 200,
				body: { name: "web", crt_base: storeDir, key_base: storeDir },
			});
			expect(await api("GET", `${CONF}/nope`)).toMatchObject({
				status: 404,
				body: { code: 404, message: "missing object: crt-store section 'nope' does not exist" },
			});
			double.assertSpecClean();
		});

		it("lists a store's loads as the configuration spells them, quotes included", async () => {
			expect(await api("GET", `${CONF}/web/crt_loads`)).toMatchObject({
				status: 200,
				body: [{ certificate: '"a.crt"', key: '"a.key"', alias: '"site-a"' }, { certificate: '"c.pem"' }],
			});
			expect(await api("GET", `${CONF}/web/crt_loads/${encodeURIComponent('"a.crt"')}`)).toMatchObject({
				status: 200,
				body: { certificate: '"a.crt"', key: '"a.key"', alias: '"site-a"' },
			});
			expect(await api("GET", `${CONF}/web/crt_loads/a.crt`)).toMatchObject({
				status: 404,
				body: { message: "missing object: CrtLoad a.crt does not exist in web crt_store" },
			});
			// A store without loads answers null (a nil Go slice), an unknown store 400 (a missing parent).
			expect(await api("GET", `${CONF}/empty/crt_loads`)).toMatchObject({ status: 200, body: null });
			expect(await api("GET", `${CONF}/nope/crt_loads`)).toMatchObject({
				status: 400,
				body: { code: 400, message: "missing parent: crt_store nope does not exist" },
			});
			double.assertSpecClean();
		});

		it("answers runtime reads of crt-store certificates as client-native parses HAProxy's", async () => {
			const names = (
				(await api("GET", "/services/haproxy/runtime/ssl_certs")).body as { storage_name: string }[]
			)
				.map((c) => c.storage_name)
				.filter((n) => n.startsWith("@"))
				.sort();
			expect(names).toEqual(["@/anon", "@web/c.pem", "@web/site-a"]);
			const pair = await api(
				"GET",
				`/services/haproxy/runtime/ssl_certs/${encodeURIComponent("@web/site-a")}`,
			);
			const one = await api("GET", `/services/haproxy/runtime/ssl_certs/${encodeURIComponent("@web/c.pem")}`);
			const anon = await api("GET", `/services/haproxy/runtime/ssl_certs/${encodeURIComponent("@/anon")}`);
			if (printsFilenames) {
				// HAProxy 3.2+ prints `Crt filename: a.crt` / `Key filename: a.key`: client-native refuses the pair.
				expect(pair.status).toBe(500);
				expect((pair.body as { message: string }).message).toContain(
					"failed to parse certificate info for a.crt: storing the private key in a separate file is not supported",
				);
				expect(one.body).toMatchObject({ storage_name: "c.pem", status: "Used" });
				expect(anon.body).toMatchObject({ storage_name: join(storeDir, "e.pem") });
			} else {
				expect(pair.body).toMatchObject({
					storage_name: "@web/site-a",
					serial: normaliseSerial(site.serial, 16),
				});
				expect(one.body).toMatchObject({ storage_name: "@web/c.pem" });
				expect(anon.body).toMatchObject({ storage_name: "@/anon" });
			}
			expect(one.body).toMatchObject({ serial: normaliseSerial(combined.serial, 16) });
			double.assertSpecClean();
		});

		it("lists only combined files in storage, reads a lone certificate or key, refuses to write one", async () => {
			const listed = (await api("GET", "/services/haproxy/storage/ssl_certificates")).body as {
				storage_name: string;
			}[];
			expect(listed.map((i) => i.storage_name)).toEqual(["c.pem", "e.pem"]);
			expect(await api("GET", "/services/haproxy/storage/ssl_certificates/a.crt")).toMatchObject({
				status: 200,
				body: {
					storage_name: "a.crt",
					serial: BigInt(`0x${site.serial}`).toString(10),
					domains: "site-a.test",
				},
			});
			const key = await api("GET", "/services/haproxy/storage/ssl_certificates/a.key");
			expect(key.status).toBe(200);
			expect(Object.keys(key.body as object).sort()).toEqual(["description", "file", "size", "storage_name"]);
			const renewed = await issueTestLeaf(ca, { names: ["site-a.test"] });
			const refused = await api("PUT", "/services/haproxy/storage/ssl_certificates/a.crt?skip_reload=true", {
				type: "text/plain",
				data: renewed.certPem + renewed.chainPem,
			});
			expect(refused).toMatchObject({
				status: 500,
				body: { message: "file should contain both certificate and private key" },
			});
			expect(await readFile(join(storeDir, "a.crt"), "utf8")).toBe(site.certPem + site.chainPem);
			double.assertSpecClean();
		});

		it("replaces a crt-store file by a reload only: HAProxy does not know it by its path", async () => {
			const renewed = await issueTestLeaf(ca, { names: ["c.test"] });
			const put = await api("PUT", "/services/haproxy/storage/ssl_certificates/c.pem", {
				type: "text/plain",
				data: renewed.combinedPem,
			});
			expect(put.status).toBe(202);
			expect(put.headers.get("reload-id")).toMatch(/^\d{4}-\d\d-\d\d-\d+$/);
			// Still the old certificate in memory until the scheduled reload; the reload serves the new one.
			const before = await api(
				"GET",
				`/services/haproxy/runtime/ssl_certs/${encodeURIComponent("@web/c.pem")}`,
			);
			expect(before.body).toMatchObject({ serial: normaliseSerial(combined.serial, 16) });
			await h.reload();
			const after = await api(
				"GET",
				`/services/haproxy/runtime/ssl_certs/${encodeURIComponent("@web/c.pem")}`,
			);
			expect(after.body).toMatchObject({ serial: normaliseSerial(renewed.serial, 16) });
			const served = await probeServed({ address: `127.0.0.1:${port}`, sni: "c.test" });
			expect(served.serial).toBe(normaliseSerial(renewed.serial, 16));
			double.assertSpecClean();
		});
	});
}
