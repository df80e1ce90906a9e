/**
 * crt-store loads through the Data Plane API: where their files are (pure), and how the target observes them
 * on a real HAProxy 3.x behind the double (HAPROXY_BIN; on 2.x, which has no crt-store, the pure tests only).
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial } from "../../../src/certificates/index.js";
import { probeServed } from "../../../src/probe/index.js";
import type { ObservedRef } from "../../../src/reconcile/model.js";
import { placeLoads, unquote } from "../../../src/targets/haproxy-dataplane/crt-stores.js";
import { createDataplaneEndpoint } from "../../../src/targets/haproxy-dataplane/index.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../harness/certs.js";
import { freePort, HAPROXY_BIN } from "../../harness/haproxy.js";
import { rig, syncOnce } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

describe("targets/haproxy-dataplane/crt-stores placement", () => {
	it("unquotes tokens as HAProxy does", () => {
		expect(unquote('"a b.crt"')).toBe("a b.crt");
		expect(unquote("'k.key'")).toBe("k.key");
		expect(unquote("a\\ b.pem")).toBe("a b.pem");
		expect(unquote("plain.pem")).toBe("plain.pem");
	});

	const D = "/etc/haproxy/ssl";
	it.each([
		{
			why: "a pair under crt-base and key-base in storage_dir",
			store: { name: "web", crt_base: D, key_base: `"${D}/"` },
			load: { certificate: '"a.crt"', key: '"a.key"', alias: '"site-a"' },
			want: {
				runtimeName: "@web/site-a",
				store: "web",
				certFile: `${D}/a.crt`,
				keyFile: `${D}/a.key`,
				certRef: "a.crt",
				keyRef: "a.key",
			},
		},
		{
			why: "a combined file without alias is named by its crt as written",
			store: { name: "web", crt_base: D },
			load: { certificate: '"c.pem"' },
			want: { runtimeName: "@web/c.pem", store: "web", certFile: `${D}/c.pem`, certRef: "c.pem" },
		},
		{
			why: "an absolute crt needs no base; an ACME-managed load says which section",
			store: { name: "le" },
			load: { certificate: `"${D}/d.pem"`, acme: "LE", domains: ['"d.test"'] },
			want: {
				runtimeName: `@le/${D}/d.pem`,
				store: "le",
				certFile: `${D}/d.pem`,
				certRef: "d.pem",
				acme: "LE",
			},
		},
		{
			why: "a relative key without key-base is not guessed from crt-base",
			store: { name: "web", crt_base: D },
			load: { certificate: "a.crt", key: "a.key", alias: "x" },
			want: {
				runtimeName: "@web/x",
				store: "web",
				certFile: `${D}/a.crt`,
				certRef: "a.crt",
				unwritable:
					'its key "a.key" is relative and the store has no key-base (HAProxy reads it from its working directory)',
			},
		},
		{
			why: "a file outside storage_dir, and a name the API would sanitise",
			store: { name: "web", crt_base: "/srv/tls", key_base: D },
			load: { certificate: "a.crt", key: "site.a.key", alias: "x" },
			want: {
				runtimeName: "@web/x",
				store: "web",
				certFile: "/srv/tls/a.crt",
				keyFile: `${D}/site.a.key`,
				unwritable: `/srv/tls/a.crt is outside storage_dir ${D}: the API's storage cannot write it; the API would address site.a.key as site_a.key: rename it on disk`,
			},
		},
	])("$why", ({ store, load, want }) => {
		expect(placeLoads([{ ...store, loads: [load] }], `${D}/`)).toEqual([want]);
	});
});

const versionText = execFileSync(HAPROXY_BIN, ["-v"], { encoding: "utf8" });
const major = Number(/version (\d+)\./.exec(versionText)?.[1] ?? 0);

// crt-store exists from HAProxy 3.0: on 2.x the layout cannot exist (test/harness/dpapi-double/crt-stores.test.ts
// asserts 2.x refuses it), so these tests are not registered there.
if (major >= 3)
	describe(`targets/haproxy-dataplane on a crt-store layout (HAProxy ${major}.x)`, () => {
		const r = rig({ reloadSafe: true });
		let ca: TestIssuer;
		let site: TestLeaf;
		let combined: TestLeaf;
		let storeDir: string;

		beforeAll(async () => {
			ca = await createTestCa("crt-store target test");
			site = await issueTestLeaf(ca, { names: ["site-a.test"] });
			combined = await issueTestLeaf(ca, { names: ["c.test"] });
			storeDir = await mkdtemp(join(tmpdir(), "certificatee-store-"));
		});
		afterAll(async () => {
			await rm(storeDir, { recursive: true, force: true });
		});

		async function layout() {
			await writeFile(join(storeDir, "a.crt"), site.certPem + site.chainPem, { mode: 0o600 });
			await writeFile(join(storeDir, "a.key"), site.keyPem, { mode: 0o600 });
			await writeFile(join(storeDir, "c.pem"), combined.combinedPem, { mode: 0o600 });
			const port = await freePort();
			const h = await r.haproxy({
				extraConfig: [
					"crt-store web",
					`    crt-base ${storeDir}`,
					`    key-base ${storeDir}`,
					'    load crt "a.crt" key "a.key" alias "site-a"',
					'    load crt "c.pem"',
					"frontend fe_store",
					`    bind 127.0.0.1:${port} ssl crt "@web/site-a" crt "@web/c.pem"`,
					'    http-request return status 200 content-type text/plain string "store\\n"',
				].join("\n"),
			});
			const d = await r.dpapi(h, { storageDir: storeDir });
			return { h, d, port };
		}

		it("observes each load as one ref named by its certificate file, with HAProxy's @store/alias name", async () => {
			const { h, d } = await layout();
			const endpoint = createDataplaneEndpoint(
				{
					name: "fra1",
					url: d.url,
					username: d.username,
					password: d.password,
					insecure_skip_verify: false,
					timeout: 10_000,
				},
				{ now: () => new Date(), storageDir: storeDir },
			);
			r.onTeardown(() => endpoint.close());
			const seen = await endpoint.observe(AbortSignal.timeout(20_000));
			expect(seen.ok, JSON.stringify(seen)).toBe(true);
			const refs = new Map((seen.ok ? seen.refs : []).map((x: ObservedRef) => [x.ref, x]));
			const pair = refs.get("a.crt");
			expect(pair).toMatchObject({
				runtimeName: "@web/site-a",
				storage: { serial: normaliseSerial(site.serial, 16), names: ["site-a.test"] },
			});
			expect(pair?.external).toContain(
				`crt-store load @web/site-a (${storeDir}/a.crt, key ${storeDir}/a.key)`,
			);
			// Its key file is part of the pair, never a ref of its own; the store's combined file is one ref too.
			expect(refs.has("a.key")).toBe(false);
			expect(refs.get("c.pem")).toMatchObject({
				runtimeName: "@web/c.pem",
				runtime: { serial: normaliseSerial(combined.serial, 16), status: "Used" },
			});
			expect([...refs.keys()].filter((k) => k.startsWith("@") || k === "site-a")).toEqual([]);
			expect(h.alive()).toBe(true);
		});

		it("never rewrites a crt-store file: a renewal leaves the pair to a later in-place write, HAProxy keeps serving", async () => {
			const { h, d, port } = await layout();
			const t = r.dataplane(h, d, { storage_dir: storeDir });
			const renewed = await issueTestLeaf(ca, { names: ["site-a.test"] });
			const e = await syncOnce(t, [desiredFromLeaf("a", renewed, ["site-a.test"])], { expectOk: true });
			// Observed and reported, never written (the API's runtime read of the pair fails on 3.2+ and no longer
			// fails the endpoint). Until in-place pair writes land, the plan still creates a.pem beside it.
			expect(e.refs?.find((x) => x.ref === "a.crt")?.class).toBe("pinned");
			expect(e.steps.filter((s) => s.ref === "a.crt" || s.ref === "a.key" || s.ref === "c.pem")).toEqual([]);
			expect(await readFile(join(storeDir, "a.crt"), "utf8")).toBe(site.certPem + site.chainPem);
			expect(await readFile(join(storeDir, "a.key"), "utf8")).toBe(site.keyPem);
			await h.reload();
			const served = await probeServed({ address: `127.0.0.1:${port}`, sni: "site-a.test" });
			expect(served.serial).toBe(normaliseSerial(site.serial, 16));
		});
	});
