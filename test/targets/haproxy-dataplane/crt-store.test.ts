/**
 * crt-store loads through the Data Plane API: where their files are (pure), and how the target observes them
 * on real HAProxy 3.0, 3.2 and 3.4 behind the double (the builds of the matrix, test/harness/haproxy-builds.ts).
 * On 3.0 the runtime API prints no file names (`Filename: @web/site-a` only): the configuration endpoints'
 * crt_loads alone place the loads.
 */
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial } from "../../../src/certificates/index.js";
import { runOnlineChecks } from "../../../src/cli/commands/online.js";
import type { Config } from "../../../src/config/schema.js";
import type { ObservedRef } from "../../../src/targets/haproxy/engine/model.js";
import { placeLoads, unquote } from "../../../src/targets/haproxy-dataplane/crt-stores.js";
import { createDataplaneEndpoint } from "../../../src/targets/haproxy-dataplane/index.js";
import { dataplaneTargetSchema } from "../../../src/targets/haproxy-dataplane/schema.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../harness/certs.js";
import { haproxyBuilds } from "../../harness/haproxy-builds.js";
import { okWrites, rig, servedSerial, syncOnce } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";
import { keyMatches, renewThreeTimes } from "../haproxy-runtime/layout-scenario.js";

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

const STORE = `crt-store web
    crt-base {dir}/D
    key-base {dir}/D
    load crt "a.crt" key "a.key" alias "site-a"
    load crt "c.pem"`;

for (const build of haproxyBuilds(["3.0", "3.2", "3.4"])) {
	describe(`targets/haproxy-dataplane on a crt-store layout, HAProxy ${build.version}`, () => {
		const r = rig({ reloadSafe: true });
		let ca: TestIssuer;
		let site: TestLeaf;
		let combined: TestLeaf;

		beforeAll(async () => {
			ca = await createTestCa("crt-store target test");
			site = await issueTestLeaf(ca, { names: ["site-a.test"] });
			combined = await issueTestLeaf(ca, { names: ["c.test"] });
		});

		async function layout() {
			const h = await r.haproxy({
				bin: build.bin,
				sections: STORE,
				bindExtra: 'crt "@web/site-a" crt "@web/c.pem"',
				bindCrtDir: false,
				bindCrtList: false,
				files: {
					"D/a.crt": site.certPem + site.chainPem,
					"D/a.key": site.keyPem,
					"D/c.pem": combined.combinedPem,
				},
			});
			const D = join(h.dir, "D");
			const d = await r.dpapi(h, { storageDir: D });
			return { h, d, D };
		}

		it(`HAProxy ${build.version}: observes each load as one ref named by its certificate file, placed by crt_loads`, async () => {
			const { d, D } = await layout();
			const endpoint = createDataplaneEndpoint(
				{
					name: "fra1",
					url: d.url,
					username: d.username,
					password: d.password,
					insecure_skip_verify: false,
					timeout: 10_000,
					max_response_size: 64 * 1024 ** 2,
				},
				{ now: () => new Date(), storageDir: D },
			);
			r.onTeardown(() => endpoint.close());
			const seen = await endpoint.observe(AbortSignal.timeout(20_000));
			expect(seen.ok, JSON.stringify(seen)).toBe(true);
			const refs = new Map((seen.ok ? seen.refs : []).map((x: ObservedRef) => [x.ref, x]));
			expect(refs.get("a.crt")).toMatchObject({
				runtimeName: "@web/site-a",
				storage: { serial: normaliseSerial(site.serial, 16), names: ["site-a.test"] },
				placement: {
					via: "crt-store",
					certFile: join(D, "a.crt"),
					key: { file: join(D, "a.key"), by: "argument" },
				},
			});
			// Its key file is part of the pair, never a ref of its own; the store's combined file is one ref too.
			expect(refs.has("a.key")).toBe(false);
			expect(refs.get("c.pem")).toMatchObject({
				runtimeName: "@web/c.pem",
				runtime: { serial: normaliseSerial(combined.serial, 16), status: "Used" },
				placement: { via: "crt-store", certFile: join(D, "c.pem") },
			});
			expect([...refs.keys()].filter((k) => k.startsWith("@") || k === "site-a")).toEqual([]);
		});

		it(`HAProxy ${build.version}: a crt-store pair renewed in place three times, a reload between; served each time, the key matches, no file created`, async () => {
			const { h, d, D } = await layout();
			const t = r.dataplane(h, d, { storage_dir: D });
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "a",
				names: ["site-a.test"],
				// Through the API each file of the pair holds the whole PEM (its storage takes nothing else).
				keyInside: true,
				files: { cert: join(D, "a.crt"), key: join(D, "a.key"), dirs: [D] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace a.crt", "runtime-set a.crt"]);
			expect(d.scheduledReloads).toEqual([]);
		});

		it(`HAProxy ${build.version}: a pair whose key file holds another leaf (a pair half written) is written again`, async () => {
			const { h, d, D } = await layout();
			const t = r.dataplane(h, d, { storage_dir: D });
			const renewed = await issueTestLeaf(ca, { names: ["site-a.test"] });
			const other = await issueTestLeaf(ca, { names: ["site-a.test"] });
			// The crt file already holds the renewal, the key file another pair's PEM: a reload would serve nothing.
			await writeFile(join(D, "a.crt"), renewed.combinedPem, { mode: 0o600 });
			await writeFile(join(D, "a.key"), other.combinedPem, { mode: 0o600 });
			const e = await syncOnce(t, [desiredFromLeaf("a", renewed, ["site-a.test"])], { expectOk: true });
			expect(okWrites(e)).toEqual(["storage-replace a.crt", "runtime-set a.crt"]);
			const cert = await readFile(join(D, "a.crt"), "utf8");
			expect(keyMatches(cert, await readFile(join(D, "a.key"), "utf8"))).toBe(true);
			await h.reload();
			expect(await servedSerial(h, "site-a.test")).toBe(renewed.serial);
		});

		// HAProxy's own ACME client (the `acme` section and load keyword) came with 3.2.
		const acme = build.version.localeCompare("3.2", "en", { numeric: true }) >= 0 ? it : undefined;
		acme?.(
			`HAProxy ${build.version}: a load HAProxy's own ACME manages is reported MANAGED_BY_HAPROXY_ACME, never written, no file created; validate --online warns`,
			async () => {
				const managed = await issueTestLeaf(ca, { names: ["d.test"] });
				const h = await r.haproxy({
					bin: build.bin,
					globalLines: ["expose-experimental-directives"],
					sections: [
						"acme LE",
						"    directory https://127.0.0.1:1/directory",
						"    contact ops@d.test",
						"crt-store le",
						"    crt-base {dir}/D",
						'    load crt "d.pem" acme LE domains "d.test"',
					].join("\n"),
					bindExtra: 'crt "@le/d.pem"',
					bindCrtDir: false,
					bindCrtList: false,
					files: { "D/d.pem": managed.combinedPem },
				});
				const D = join(h.dir, "D");
				const d = await r.dpapi(h, { storageDir: D });
				const t = r.dataplane(h, d, { storage_dir: D });
				const renewed = await issueTestLeaf(ca, { names: ["d.test"] });
				for (let i = 0; i < 2; i++) {
					const e = await syncOnce(t, [desiredFromLeaf("d", renewed, ["d.test"])], { expectOk: true });
					expect(e.verdicts).toContainEqual(
						expect.objectContaining({ class: "refused", ref: "d.pem", code: "MANAGED_BY_HAPROXY_ACME" }),
					);
					expect(e.steps).toEqual([]);
				}
				expect(await readFile(join(D, "d.pem"), "utf8")).toBe(managed.combinedPem);
				expect((await readdir(D)).sort()).toEqual(["d.pem"]);
				expect(await servedSerial(h, "d.test")).toBe(managed.serial);

				// validate --online warns: the configured certificate "d" is managed by HAProxy's ACME too.
				const target = dataplaneTargetSchema.parse({
					name: "fra",
					type: "haproxy-dataplane",
					storage_dir: D,
					endpoints: [{ name: "fra1", url: d.url, username: d.username, password: d.password }],
				});
				const config = { targets: [target], certificates: [{ name: "d", domains: ["d.test"] }], sources: [] };
				const [check] = await runOnlineChecks(config as unknown as Config);
				expect(check?.ok, JSON.stringify(check)).toBe(true);
				expect(check?.warnings).toEqual([
					`certificate "d" (d.test) is also managed by HAProxy's own ACME client: @le/d.pem, acme section "LE"; certificatee never writes it (MANAGED_BY_HAPROXY_ACME). Keep one ACME client per certificate`,
				]);
			},
		);

		it(`HAProxy ${build.version}: a combined crt-store file renewed in place, by its @store name`, async () => {
			const { h, d, D } = await layout();
			const t = r.dataplane(h, d, { storage_dir: D });
			const renewed = await issueTestLeaf(ca, { names: ["c.test"] });
			const e = await syncOnce(t, [desiredFromLeaf("c", renewed, ["c.test"])], { expectOk: true });
			expect(okWrites(e)).toEqual(["storage-replace c.pem", "runtime-set c.pem"]);
			expect(await servedSerial(h, "c.test")).toBe(renewed.serial);
			expect(await readFile(join(D, "c.pem"), "utf8")).toBe(renewed.combinedPem);
		});
	});
}
