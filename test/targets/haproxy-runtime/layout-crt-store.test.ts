/**
 * A crt-store with separate files (`load crt "a.crt" key "a.key" alias "site-a"`, bound as `crt "@web/site-a"`),
 * HAProxy 3.0, 3.2 and 3.4 (issue 23). HAProxy's `key` argument overrides a key inside the crt file, so writing a
 * combined PEM into a.crt while a.key keeps the old key takes the name down at the next reload. certificatee
 * renews the store's own files in place, as a pair, and its runtime entry by its name `@web/site-a`. 3.0 prints
 * no file of a load (`show ssl cert @web/site-a`): there the files come from haproxy_config; 3.2+ prints them
 * relative to the store's bases, which crt_stores or haproxy_config say. Where the two sources disagree, or
 * haproxy_config cannot be used, the load is refused naming the file and line, and never written.
 */
import { readdir, readFile, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { Verdict } from "../../../src/reconcile/verdict.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import type { Haproxy } from "../../harness/haproxy.js";
import { haproxyBuilds } from "../../harness/haproxy-builds.js";
import { assertReloadSafe } from "../../harness/invariant.js";
import { syncOnce as cycle, rig, servedSerial, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";
import { keyMatches, renewThreeTimes } from "./layout-scenario.js";

type Refused = Extract<Verdict, { class: "refused" }>;

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("crt-store CA");
});

const STORE = `crt-store web
    crt-base {dir}/D
    key-base {dir}/D
    load crt "a.crt" key "a.key" alias "site-a"`;

/** Starts HAProxy `bin` with the store above holding a fresh a.crt + a.key. */
async function storeHaproxy(bin: string, names: string[]): Promise<{ h: Haproxy; D: string }> {
	const first = await issueTestLeaf(ca, { names });
	const h = await r.haproxy({
		bin,
		sections: STORE,
		bindExtra: `crt "@web/site-a"`,
		bindCrtDir: false,
		bindCrtList: false,
		files: { "D/a.crt": first.certPem + first.chainPem, "D/a.key": first.keyPem },
	});
	return { h, D: join(h.dir, "D") };
}

/** The 1-based line of `h`'s haproxy.cfg that contains `text`. */
async function lineOf(path: string, text: string): Promise<number> {
	const lines = (await readFile(path, "utf8")).split("\n");
	const i = lines.findIndex((l) => l.includes(text));
	expect(i, `${path} has a line with ${text}`).toBeGreaterThanOrEqual(0);
	return i + 1;
}

for (const build of haproxyBuilds(["3.0", "3.2", "3.4"])) {
	const v30 = build.version.startsWith("3.0.");
	describe(`HAProxy ${build.version}: a crt-store pair`, () => {
		it(`HAProxy ${build.version}: renewed in place three times${v30 ? " with haproxy_config (3.0 prints no file of a load)" : ""}, a reload between renewals; served each time, the key matches, no file created`, async () => {
			const names = ["a.lay.test"];
			const { h, D } = await storeHaproxy(build.bin, names);
			const t = r.runtime(
				h,
				v30
					? { crt_dir: D, haproxy_config: h.configPath }
					: { crt_dir: D, crt_stores: { web: { crt_base: D, key_base: D } } },
			);
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "a",
				names,
				files: { cert: join(D, "a.crt"), key: join(D, "a.key"), dirs: [D] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace @web/site-a", "runtime-set @web/site-a"]);
			expect((await readdir(D)).sort()).toEqual(["a.crt", "a.key"]);
		});

		if (v30) {
			it(`HAProxy ${build.version}: without haproxy_config a load is PLACEMENT_UNKNOWN and never written (3.0 prints no file of it)`, async () => {
				const names = ["a.lay.test"];
				const { h, D } = await storeHaproxy(build.bin, names);
				const before = await readFile(join(D, "a.crt"), "utf8");
				const t = r.runtime(h, { crt_dir: D });
				const e = await cycle(t, [desiredFromLeaf("a", await issueTestLeaf(ca, { names }), names)], {
					expectOk: true,
				});
				expect(writes(e)).toEqual([]);
				expect(e.verdicts).toContainEqual(
					expect.objectContaining({ class: "refused", ref: "@web/site-a", code: "PLACEMENT_UNKNOWN" }),
				);
				expect(await readFile(join(D, "a.crt"), "utf8")).toBe(before);
			});
		}

		it(`HAProxy ${build.version}: a haproxy_config that disagrees with HAProxy (a store it lacks, another key file, an unreadable file) refuses the load naming the file and line; nothing is written`, async () => {
			const names = ["a.lay.test"];
			const { h, D } = await storeHaproxy(build.bin, names);
			const want = [desiredFromLeaf("a", await issueTestLeaf(ca, { names }), names)];
			const before = {
				crt: await readFile(join(D, "a.crt"), "utf8"),
				key: await readFile(join(D, "a.key"), "utf8"),
			};
			const running = await readFile(h.configPath, "utf8");
			const other = join(h.dir, "other.cfg");
			const refusal = async (path: string) => {
				const t = r.runtime(h, { crt_dir: D, haproxy_config: path });
				const e = await cycle(t, want, { expectOk: true });
				expect(writes(e)).toEqual([]);
				const v = e.verdicts.find((x): x is Refused => x.class === "refused" && x.ref === "@web/site-a");
				expect(v, JSON.stringify(e.verdicts)).toBeDefined();
				return v as Refused;
			};

			// No crt-store "web" at all: not the configuration HAProxy runs.
			await writeFile(other, running.replace("crt-store web", "crt-store other"));
			let v = await refusal(other);
			expect(v.code).toBe("HAPROXY_CONFIG_MISMATCH");
			expect(v.why).toContain(`declares no crt-store "web"`);
			expect(v.hint).toContain(other);

			// The store, but its load names another key file (changed since the last reload).
			await writeFile(other, running.replace(`key "a.key"`, `key "b.key"`));
			const line = await lineOf(other, `key "b.key"`);
			v = await refusal(other);
			expect(v.code).toBe("HAPROXY_CONFIG_MISMATCH");
			expect(v.hint).toContain(`${other}:${line}`);
			expect(v.why).toContain(
				v30
					? `${other}:${line} loads @web/site-a with key ${join(D, "b.key")}, which is not a file`
					: `${other}:${line} loads @web/site-a with key "b.key", but HAProxy's running worker loaded it with key "a.key"`,
			);

			// A file that cannot be read.
			v = await refusal(join(h.dir, "missing.cfg"));
			expect(v.code).toBe("HAPROXY_CONFIG_INVALID");
			expect(v.why).toContain(join(h.dir, "missing.cfg"));

			expect(await readFile(join(D, "a.crt"), "utf8")).toBe(before.crt);
			expect(await readFile(join(D, "a.key"), "utf8")).toBe(before.key);
			expect((await readdir(D)).sort()).toEqual(["a.crt", "a.key"]);
		});
	});
}

for (const build of haproxyBuilds(["3.4"])) {
	describe(`HAProxy ${build.version}: a crt-store pair placed by haproxy_config and the runtime together`, () => {
		it(`HAProxy ${build.version}: with haproxy_config alone (no crt_stores; Crt/Key filename agree with it), renewed in place three times, a reload between renewals`, async () => {
			const names = ["a.lay.test"];
			const { h, D } = await storeHaproxy(build.bin, names);
			const t = r.runtime(h, { crt_dir: D, haproxy_config: h.configPath });
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "a",
				names,
				files: { cert: join(D, "a.crt"), key: join(D, "a.key"), dirs: [D] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace @web/site-a", "runtime-set @web/site-a"]);
		});
	});
}

const STORE_APART = `crt-store web
    crt-base {dir}/D
    key-base {dir}/K
    load crt "a.crt" key "a.key" alias "site-a"`;

for (const build of haproxyBuilds(["3.0", "3.2", "3.4"])) {
	// 3.0 learns both bases from haproxy_config; 3.2 from crt_stores; 3.4 from haproxy_config and Key filename.
	const how = build.version.startsWith("3.2.") ? "crt_stores" : "haproxy_config";
	describe(`HAProxy ${build.version}: a crt-store whose key-base is another directory than its crt-base`, () => {
		it(`HAProxy ${build.version}: renewed in place three times (${how}), the key in its own directory, a reload between renewals; served each time, the key matches, no file created in either directory`, async () => {
			const names = ["a.lay.test"];
			const first = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				sections: STORE_APART,
				bindExtra: `crt "@web/site-a"`,
				bindCrtDir: false,
				bindCrtList: false,
				files: { "D/a.crt": first.certPem + first.chainPem, "K/a.key": first.keyPem },
			});
			const [D, K] = [join(h.dir, "D"), join(h.dir, "K")];
			const t = r.runtime(
				h,
				how === "crt_stores"
					? { crt_dir: D, crt_stores: { web: { crt_base: D, key_base: K } } }
					: { crt_dir: D, haproxy_config: h.configPath },
			);
			const perCycle = await renewThreeTimes({
				h,
				t,
				ca,
				name: "a",
				names,
				files: { cert: join(D, "a.crt"), key: join(K, "a.key"), dirs: [D, K] },
			});
			for (const w of perCycle) expect(w).toEqual(["storage-replace @web/site-a", "runtime-set @web/site-a"]);
			expect(await readdir(D)).toEqual(["a.crt"]);
			expect(await readdir(K)).toEqual(["a.key"]);
		});

		it(`HAProxy ${build.version}: killed between the key file and the certificate file (${how}), the next observation finishes the journal before it reads anything and sweeps a temp file left in the key's directory; served, the key matches, reload-safe`, async () => {
			const names = ["a.lay.test"];
			const first = await issueTestLeaf(ca, { names });
			const next = await issueTestLeaf(ca, { names });
			const h = await r.haproxy({
				bin: build.bin,
				sections: STORE_APART,
				bindExtra: `crt "@web/site-a"`,
				bindCrtDir: false,
				bindCrtList: false,
				files: { "D/a.crt": first.certPem + first.chainPem, "K/a.key": first.keyPem },
			});
			const [D, K] = [join(h.dir, "D"), join(h.dir, "K")];
			// What a writer killed between its two renames leaves (pair.ts): the new key live in K, the new
			// certificate still under its temp name in D, the journal in crt_dir; and an older write's temp key in K.
			const certTemp = join(D, ".a.crt.certificatee-pair-0123456789ab.tmp");
			await writeFile(certTemp, next.certPem + next.chainPem, { mode: 0o600 });
			await writeFile(join(K, "a.key"), next.keyPem, { mode: 0o600 });
			const journal = {
				renames: [
					{ from: join(K, ".a.key.certificatee-pair-ba9876543210.tmp"), to: join(K, "a.key") },
					{ from: certTemp, to: join(D, "a.crt") },
				],
			};
			await writeFile(join(D, ".certificatee-pair-00000000abcd.json"), JSON.stringify(journal), {
				mode: 0o600,
			});
			const stray = join(K, ".a.key.certificatee-pair-fedcba987654.tmp");
			await writeFile(stray, first.keyPem, { mode: 0o600 });
			const old = new Date(Date.now() - 60_000);
			await utimes(stray, old, old);
			const t = r.runtime(
				h,
				how === "crt_stores"
					? { crt_dir: D, crt_stores: { web: { crt_base: D, key_base: K } } }
					: { crt_dir: D, haproxy_config: h.configPath },
			);
			const e = await cycle(t, [desiredFromLeaf("a", next, names)], { expectOk: true });
			// The files are the new pair already: only HAProxy's memory is behind.
			expect(writes(e)).toEqual(["runtime-set @web/site-a"]);
			expect(await readdir(D)).toEqual(["a.crt"]);
			expect(await readdir(K)).toEqual(["a.key"]);
			expect(
				keyMatches(await readFile(join(D, "a.crt"), "utf8"), await readFile(join(K, "a.key"), "utf8")),
			).toBe(true);
			expect(await servedSerial(h, "a.lay.test")).toBe(next.serial);
			await assertReloadSafe(h);
			expect(await servedSerial(h, "a.lay.test")).toBe(next.serial);
		});
	});
}
