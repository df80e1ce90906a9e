import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createDirectorySource, directorySourceSchema } from "../../../src/sources/directory/index.js";
import { createParsedCache, type Identity } from "../../../src/sources/directory/parsed-cache.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";

const DAY = 86_400_000;
const signal = new AbortController().signal;
const combined = (name: string) => ({ name, kind: "combined" as const, file: `${name}.pem` });

let ca: TestIssuer;
let dir: string;
beforeAll(async () => {
	ca = await createTestCa();
});
beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-parsed-cache-"));
});
afterEach(async () => {
	await rm(dir, { recursive: true, force: true });
});

async function renameInto(file: string, text: string) {
	await writeFile(join(dir, `.${file}.new`), text);
	await rename(join(dir, `.${file}.new`), join(dir, file));
}

describe("sources/directory parsed cache", () => {
	it("parses a file once while its identity stays the same", async () => {
		const a = await issueTestLeaf(ca, { names: ["a.test"] });
		await writeFile(join(dir, "a.pem"), a.combinedPem);
		const cache = createParsedCache({ racyMs: 0 });
		const first = cache.lookup(dir, combined("a"));
		expect("miss" in first).toBe(true);
		const parsed = await cache.parse(dir, combined("a"), (first as { miss: Identity }).miss);
		expect(parsed.ok && parsed.bundle.leaf.serial).toBe(a.serial);
		const again = cache.lookup(dir, combined("a"));
		expect(again).toEqual({ hit: parsed });
		expect("hit" in again && again.hit).toBe(parsed);
	});

	it("parses again after a rename onto the name (a new inode) and after an in-place rewrite", async () => {
		const a = await issueTestLeaf(ca, { names: ["a.test"] });
		const b = await issueTestLeaf(ca, { names: ["a.test"] });
		const cache = createParsedCache({ racyMs: 0 });
		const load = async () => {
			const found = cache.lookup(dir, combined("a"));
			const parsed = "hit" in found ? found.hit : await cache.parse(dir, combined("a"), found.miss);
			return { hit: "hit" in found, serial: parsed.ok ? parsed.bundle.leaf.serial : parsed.error.code };
		};
		await writeFile(join(dir, "a.pem"), a.combinedPem);
		expect(await load()).toEqual({ hit: false, serial: a.serial });
		await renameInto("a.pem", b.combinedPem);
		expect(await load()).toEqual({ hit: false, serial: b.serial });
		expect(await load()).toEqual({ hit: true, serial: b.serial });
		await writeFile(join(dir, "a.pem"), "not a certificate\n");
		expect(await load()).toEqual({ hit: false, serial: "BUNDLE_NOT_PEM" });
		// A parse error is a function of the bytes: remembered like a bundle.
		expect(await load()).toEqual({ hit: true, serial: "BUNDLE_NOT_PEM" });
	});

	it("does not trust a file changed within the racy window: it is parsed again until it has been quiet", async () => {
		const a = await issueTestLeaf(ca, { names: ["a.test"] });
		await writeFile(join(dir, "a.pem"), a.combinedPem);
		const cache = createParsedCache({ racyMs: 60_000 });
		for (let i = 0; i < 3; i++) {
			const found = cache.lookup(dir, combined("a"));
			expect("miss" in found).toBe(true);
			await cache.parse(dir, combined("a"), (found as { miss: Identity }).miss);
		}
	});

	it("forgets names that are no longer candidates", async () => {
		const a = await issueTestLeaf(ca, { names: ["a.test"] });
		await writeFile(join(dir, "a.pem"), a.combinedPem);
		await writeFile(join(dir, "b.pem"), a.combinedPem);
		const cache = createParsedCache({ racyMs: 0 });
		for (const c of [combined("a"), combined("b")]) {
			const found = cache.lookup(dir, c);
			if ("miss" in found) await cache.parse(dir, c, found.miss);
		}
		expect(cache.size).toBe(2);
		cache.retain(new Set(["a"]));
		expect(cache.size).toBe(1);
	});
});

describe("sources/directory with its cache", () => {
	it("keeps the parsed bundle of unchanged files across loads and re-parses only the changed one", async () => {
		const a = await issueTestLeaf(ca, { names: ["a.test"] });
		const b = await issueTestLeaf(ca, { names: ["b.test"] });
		const b2 = await issueTestLeaf(ca, { names: ["b.test"] });
		await writeFile(join(dir, "a.pem"), a.combinedPem);
		await writeFile(join(dir, "b.pem"), b.combinedPem);
		const source = createDirectorySource(
			directorySourceSchema.parse({ name: "certs", type: "directory", path: dir }),
			{ racyMs: 0 },
		);
		const first = await source.load(signal);
		await renameInto("b.pem", b2.combinedPem);
		const second = await source.load(signal);
		const byName = (r: typeof first, name: string) => r.certificates.find((c) => c.name === name)?.bundle;
		expect(byName(second, "a")).toBe(byName(first, "a"));
		expect(byName(second, "b")?.leaf.serial).toBe(b2.serial);
		expect(byName(second, "b")).not.toBe(byName(first, "b"));
	});

	it("checks a cached bundle against the current time: it stops being served once it expires", async () => {
		const a = await issueTestLeaf(ca, { names: ["a.test"], notAfter: new Date(Date.now() + DAY) });
		await writeFile(join(dir, "a.pem"), a.combinedPem);
		let now = new Date();
		const source = createDirectorySource(
			directorySourceSchema.parse({ name: "certs", type: "directory", path: dir }),
			{ racyMs: 0, clock: () => now },
		);
		expect((await source.load(signal)).certificates.map((c) => c.name)).toEqual(["a"]);
		now = new Date(Date.now() + 2 * DAY);
		const later = await source.load(signal);
		expect(later.certificates).toEqual([]);
		expect(later.problems.map((p) => p.error.code)).toEqual(["BUNDLE_EXPIRED"]);
	});

	it("answers an unchanged directory with the last answer itself, until a file changes or a certificate's dates do", async () => {
		const a = await issueTestLeaf(ca, { names: ["a.test"], notAfter: new Date(Date.now() + DAY) });
		const b = await issueTestLeaf(ca, { names: ["b.test"], notBefore: new Date(Date.now() + 2 * DAY) });
		await writeFile(join(dir, "a.pem"), a.combinedPem);
		await writeFile(join(dir, "b.pem"), b.combinedPem);
		let now = new Date();
		const source = createDirectorySource(
			directorySourceSchema.parse({ name: "certs", type: "directory", path: dir }),
			{ racyMs: 0, clock: () => now },
		);
		const names = (r: Awaited<ReturnType<typeof source.load>>) => r.certificates.map((c) => c.name);
		const first = await source.load(signal);
		expect(names(first)).toEqual(["a"]);
		expect(first.problems.map((p) => p.error.code)).toEqual(["BUNDLE_NOT_YET_VALID"]);
		// Nothing changed: the same answer, not a copy of it.
		expect(await source.load(signal)).toBe(first);
		now = new Date(now.getTime() + 60_000);
		expect(await source.load(signal)).toBe(first);
		// A file that is not a certificate appears: a new listing, the same certificates.
		await writeFile(join(dir, "README"), "notes\n");
		const listed = await source.load(signal);
		expect(listed).not.toBe(first);
		expect(names(listed)).toEqual(["a"]);
		expect(await source.load(signal)).toBe(listed);
		// a expires: the answer changes without any file changing.
		now = new Date(Date.now() + DAY + 1000);
		const expired = await source.load(signal);
		expect(names(expired)).toEqual([]);
		expect(expired.problems.map((p) => p.error.code).sort()).toEqual([
			"BUNDLE_EXPIRED",
			"BUNDLE_NOT_YET_VALID",
		]);
		// b becomes valid (5 minutes of clock skew allowed).
		now = new Date(Date.now() + 2 * DAY - 60_000);
		expect(names(await source.load(signal))).toEqual(["b"]);
		// The clock going back is never answered from the last load.
		now = new Date();
		expect(names(await source.load(signal))).toEqual(["a"]);
	});
});
