import { mkdtemp, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createDirectorySource, directorySourceSchema } from "../../../src/sources/directory/index.js";
import { storedSourceMemory } from "../../../src/sources/directory/memory.js";
import type { SourceResult } from "../../../src/sources/types.js";
import { openFileStore } from "../../../src/store/file-store.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";

const DAY = 86_400_000;
const signal = new AbortController().signal;
const inDays = (d: number) => new Date(Date.now() + d * DAY);

let ca: TestIssuer;
let intermediate: TestIssuer;
let dir: string;
beforeAll(async () => {
	ca = await createTestCa();
	intermediate = await createTestCa("certificatee test intermediate", { issuer: ca });
});
beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-dirsource-"));
});
afterEach(async () => {
	await rm(dir, { recursive: true, force: true });
});

const put = (file: string, text: string) => writeFile(join(dir, file), text);
const source = (debounce = "500ms") =>
	createDirectorySource(
		directorySourceSchema.parse({ name: "certs", type: "directory", path: dir, debounce }),
	);
const report = (r: SourceResult) =>
	r.problems.map((p) => `${p.subject.replace(`${dir}/`, "")}: ${p.error.code}`).sort();
const served = (r: SourceResult) => r.certificates.map((c) => `${c.name} ${c.bundle.leaf.serial}`);

describe("sources/directory", () => {
	it("serves exactly the good, newest files and names each skipped file with its reason", async () => {
		const a = await issueTestLeaf(ca, { names: ["a.test", "www.a.test"], notAfter: inDays(30) });
		const aOld = await issueTestLeaf(ca, { names: ["www.a.test", "a.test"], notAfter: inDays(10) });
		const b = await issueTestLeaf(ca, { names: ["b.test"], intermediates: [intermediate] });
		const other = await issueTestLeaf(ca, { names: ["m.test"] });
		const expired = await issueTestLeaf(ca, {
			names: ["e.test"],
			notBefore: inDays(-20),
			notAfter: inDays(-1),
		});
		await put("a.pem", a.combinedPem);
		await put("a-old.pem", aOld.combinedPem);
		await put("b.crt", b.certPem);
		await put("b.key", b.keyPem);
		await put("b.chain.pem", b.chainPem);
		await put("mismatch.pem", `${a.certPem}${other.keyPem}`);
		await put("expired.pem", expired.combinedPem);
		await put("truncated.pem", a.combinedPem.slice(0, 300));
		await put("junk.pem", "not a certificate\n");
		await put("lonely.crt", other.certPem);
		await put("README.txt", "ignored");

		const result = await source().load(signal);
		expect(served(result)).toEqual([`a ${a.serial}`, `b ${b.serial}`]);
		expect(result.certificates.find((c) => c.name === "b")?.bundle.chain).toHaveLength(1);
		expect(result.certificates[0]?.names).toEqual(["a.test", "www.a.test"]);
		expect(result.certificates[0]?.origin).toBe(`source certs: ${join(dir, "a.pem")}`);
		expect(report(result)).toEqual([
			"a-old.pem: SOURCE_OLDER",
			"expired.pem: BUNDLE_EXPIRED",
			"junk.pem: BUNDLE_NOT_PEM",
			"lonely.crt: BUNDLE_NO_KEY",
			"mismatch.pem: BUNDLE_KEY_MISMATCH",
			"truncated.pem: BUNDLE_TRUNCATED",
		]);
		for (const p of result.problems) {
			expect(p.error.message).toContain(p.subject.split(" + ")[0]);
			expect(p.error.message).not.toMatch(/-----BEGIN|[A-Za-z0-9+/]{40,}/);
		}
	});

	it("never replaces a served certificate by an invalid or older file, but takes a newer one", async () => {
		const first = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(30) });
		await put("a.pem", first.combinedPem);
		const s = source();
		expect(served(await s.load(signal))).toEqual([`a ${first.serial}`]);

		const older = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(5) });
		await put("a.pem", older.combinedPem);
		let result = await s.load(signal);
		expect(served(result)).toEqual([`a ${first.serial}`]);
		expect(report(result)).toEqual(["a.pem: SOURCE_OLDER"]);

		await put("a.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n");
		result = await s.load(signal);
		expect(served(result)).toEqual([`a ${first.serial}`]);
		expect(report(result)).toEqual(["a.pem: BUNDLE_TRUNCATED"]);

		const newer = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(60) });
		await put("a.pem", newer.combinedPem);
		result = await s.load(signal);
		expect(served(result)).toEqual([`a ${newer.serial}`]);
		expect(result.problems).toEqual([]);

		// A certificate with other names under the same file name is a change, not an older copy.
		const renamed = await issueTestLeaf(ca, { names: ["other.test"], notAfter: inDays(2) });
		await put("a.pem", renamed.combinedPem);
		expect(served(await s.load(signal))).toEqual([`a ${renamed.serial}`]);

		await unlink(join(dir, "a.pem"));
		expect(served(await s.load(signal))).toEqual([]);
	});

	it("keeps what it serves in place of a file in the state store: a new source (a fresh CLI, a restart) serves the same", async () => {
		const stateDir = await mkdtemp(join(tmpdir(), "certificatee-dirsource-state-"));
		const store = await openFileStore(stateDir);
		const warnings: string[] = [];
		const deps = (readOnly: boolean, on = store) => ({
			memory: storedSourceMemory("certs", {
				store: on,
				readOnly,
				warn: (_f: unknown, m: string) => warnings.push(m),
			}),
		});
		const config = directorySourceSchema.parse({ name: "certs", type: "directory", path: dir });
		try {
			const first = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(300) });
			await put("a.pem", first.combinedPem);
			expect(served(await createDirectorySource(config, deps(false)).load(signal))).toEqual([
				`a ${first.serial}`,
			]);
			// What was served is remembered (in one of 16 records), so a fresh process knows it.
			const remembered = async () => {
				const keys = await store.list("sources/certs/");
				const records = await Promise.all(keys.map((k) => store.get(k)));
				return records.flatMap((r) =>
					Object.entries(
						(r?.value as { served: Record<string, { serial: string }> } | undefined)?.served ?? {},
					).map(([name, e]) => `${name} ${e.serial}`),
				);
			};
			expect(await remembered()).toEqual([`a ${first.serial}`]);

			const daemon = createDirectorySource(config, deps(false));
			await daemon.load(signal);
			const other = await issueTestLeaf(ca, { names: ["b.test"] });
			await put("a.pem", `${first.certPem}${other.keyPem}`);
			let result = await daemon.load(signal);
			expect(served(result)).toEqual([`a ${first.serial}`]);
			expect(result.problems.map((p) => `${p.certificate} ${p.error.code}`)).toEqual([
				"a BUNDLE_KEY_MISMATCH",
			]);
			expect(result.problems[0]?.error.hint).toContain(`serial ${first.serial}`);

			// A fresh process reading the store without its lock (status, plan) serves the same.
			const reader = await openFileStore(stateDir, { readOnly: true });
			result = await createDirectorySource(config, deps(true, reader)).load(signal);
			expect(served(result)).toEqual([`a ${first.serial}`]);
			expect(result.problems.map((p) => `${p.certificate} ${p.error.code}`)).toEqual([
				"a BUNDLE_KEY_MISMATCH",
			]);

			// An older file: refused by a new process too.
			const shorter = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(80) });
			await put("a.pem", shorter.combinedPem);
			result = await createDirectorySource(config, deps(true, reader)).load(signal);
			expect(served(result)).toEqual([`a ${first.serial}`]);
			expect(report(result)).toEqual(["a.pem: SOURCE_OLDER"]);

			// Fixed: the file is served again and nothing is held any more.
			const newer = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(320) });
			await put("a.pem", newer.combinedPem);
			expect(served(await daemon.load(signal))).toEqual([`a ${newer.serial}`]);
			expect(await remembered()).toEqual([`a ${newer.serial}`]);
			result = await createDirectorySource(config, deps(true, reader)).load(signal);
			expect(served(result)).toEqual([`a ${newer.serial}`]);

			// A removed file removes the certificate, held or not.
			await put("a.pem", `${first.certPem}${other.keyPem}`);
			expect(served(await daemon.load(signal))).toEqual([`a ${newer.serial}`]);
			await unlink(join(dir, "a.pem"));
			expect(served(await daemon.load(signal))).toEqual([]);
			expect(served(await createDirectorySource(config, deps(true, reader)).load(signal))).toEqual([]);
			expect(await remembered()).toEqual([]);
			expect(warnings).toEqual([]);
		} finally {
			store.close();
			await rm(stateDir, { recursive: true, force: true });
		}
	});

	it("a deliberate replacement (certificatee replace) is served although it expires earlier, and only that certificate", async () => {
		const config = directorySourceSchema.parse({ name: "certs", type: "directory", path: dir });
		const long = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(300) });
		const short = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(80) });
		const other = await issueTestLeaf(ca, { names: ["a.test"], notAfter: inDays(70) });
		let accepted = new Map<string, string>();
		const s = createDirectorySource(config, { replacements: async () => accepted });
		await put("a.pem", long.combinedPem);
		expect(served(await s.load(signal))).toEqual([`a ${long.serial}`]);
		await put("a.pem", short.combinedPem);
		expect(report(await s.load(signal))).toEqual(["a.pem: SOURCE_OLDER"]);

		const fingerprint = (await createDirectorySource(config).load(signal)).certificates[0]?.bundle.leaf
			.fingerprint;
		accepted = new Map([["a", fingerprint as string]]);
		let result = await s.load(signal);
		expect(served(result)).toEqual([`a ${short.serial}`]);
		expect(result.problems).toEqual([]);

		// Another file that expires earlier still is not.
		await put("a.pem", other.combinedPem);
		expect(served(await s.load(signal))).toEqual([`a ${short.serial}`]);
		// Beside another file for the same names, the replacement wins.
		await put("a.pem", short.combinedPem);
		await put("b.pem", long.combinedPem);
		result = await s.load(signal);
		expect(served(result)).toEqual([`a ${short.serial}`]);
		expect(result.problems[0]?.error.message).toContain("deliberate replacement");
	});

	it("serves an RSA and an ECDSA file for the same names side by side; two files of one key type compete with a true reason", async () => {
		const notAfter = inDays(60);
		const notBefore = inDays(-1);
		const rsa = await issueTestLeaf(ca, { names: ["www.test"], keyType: "rsa-2048", notBefore, notAfter });
		const ecdsa = await issueTestLeaf(ca, { names: ["www.test"], notBefore, notAfter });
		await put("www-rsa.pem", rsa.combinedPem);
		await put("www-ecdsa.pem", ecdsa.combinedPem);
		let result = await source().load(signal);
		expect(served(result).sort()).toEqual([`www-ecdsa ${ecdsa.serial}`, `www-rsa ${rsa.serial}`].sort());
		expect(result.problems).toEqual([]);

		// A second ECDSA file with the same validity: the file name decides, and the message says so.
		const twin = await issueTestLeaf(ca, { names: ["www.test"], notBefore, notAfter });
		await put("www-ecdsa2.pem", twin.combinedPem);
		result = await source().load(signal);
		expect(served(result).sort()).toEqual([`www-ecdsa ${ecdsa.serial}`, `www-rsa ${rsa.serial}`].sort());
		expect(report(result)).toEqual(["www-ecdsa2.pem: SOURCE_OLDER"]);
		const message = result.problems[0]?.error.message ?? "";
		expect(message).toContain("same key type (ECDSA)");
		expect(message).toContain("whose file name sorts first");
		expect(message).not.toMatch(/expires later \((\S+) > \1\)/);

		// The same expiry, issued later: the later issue is served whatever its file name.
		const reissued = await issueTestLeaf(ca, { names: ["www.test"], notBefore: new Date(), notAfter });
		await put("www-ecdsa2.pem", reissued.combinedPem);
		result = await source().load(signal);
		expect(served(result).sort()).toEqual([`www-ecdsa2 ${reissued.serial}`, `www-rsa ${rsa.serial}`].sort());
		expect(result.problems.map((p) => p.error.message)).toEqual([
			expect.stringMatching(/www-ecdsa\.pem: .* expires at the same time .* and was issued later/),
		]);
	});

	it("reports a missing directory as SOURCE_UNREADABLE without throwing", async () => {
		const s = createDirectorySource(
			directorySourceSchema.parse({ name: "gone", type: "directory", path: join(dir, "missing") }),
		);
		const result = await s.load(signal);
		expect(result.certificates).toEqual([]);
		expect(result.problems.map((p) => p.error.code)).toEqual(["SOURCE_UNREADABLE"]);
	});

	it("watch() calls back once per burst of changes, after the debounce", async () => {
		const s = source("150ms");
		let calls = 0;
		const stop = s.watch(() => {
			calls += 1;
		});
		try {
			for (let i = 0; i < 5; i++) await put(`f${i}.pem`, "x");
			await new Promise((r) => setTimeout(r, 600));
			expect(calls).toBe(1);
			await put("later.pem", "y");
			await new Promise((r) => setTimeout(r, 600));
			expect(calls).toBe(2);
		} finally {
			stop();
		}
		await put("after-stop.pem", "z");
		await new Promise((r) => setTimeout(r, 400));
		expect(calls).toBe(2);
	});

	it("watch() does not wait for the end of a long burst: it calls back 10 debounces after its first change", async () => {
		const s = source("300ms");
		let calls = 0;
		const stop = s.watch(() => {
			calls += 1;
		});
		try {
			// A change every 30 ms for 4 s: never quiet for 300 ms.
			const until = Date.now() + 4000;
			for (let i = 0; Date.now() < until; i++) {
				await put("busy.pem", String(i));
				await new Promise((r) => setTimeout(r, 30));
			}
			expect(calls).toBeGreaterThanOrEqual(1);
		} finally {
			stop();
		}
	});
});

describe("sources/directory: files too recent to trust", () => {
	it("in the daemon (watched), files read within the racy window are read again in the background once old enough: no cycle, and the next load trusts them", async () => {
		const leaf = await issueTestLeaf(ca, { names: ["fresh.test"] });
		await put("fresh.pem", leaf.combinedPem);
		const s = createDirectorySource(
			directorySourceSchema.parse({ name: "certs", type: "directory", path: dir, debounce: "10s" }),
			{ racyMs: 300 },
		);
		let woken = 0;
		const stop = s.watch(() => woken++);
		try {
			expect(served(await s.load(signal))).toHaveLength(1);
			expect(s.untrusted).toBe(1);
			await new Promise((r) => setTimeout(r, 800));
			expect(s.untrusted).toBe(0);
			// Nothing woke the daemon for it (the 10 s debounce has not fired either).
			expect(woken).toBe(0);
			expect(served(await s.load(signal))).toHaveLength(1);
		} finally {
			stop();
		}
	});

	it("a source nobody watches (plan, validate) leaves them for its next load", async () => {
		const leaf = await issueTestLeaf(ca, { names: ["fresh.test"] });
		await put("fresh.pem", leaf.combinedPem);
		const s = createDirectorySource(
			directorySourceSchema.parse({ name: "certs", type: "directory", path: dir }),
			{ racyMs: 300 },
		);
		await s.load(signal);
		await new Promise((r) => setTimeout(r, 600));
		expect(s.untrusted).toBe(1);
		await s.load(signal);
		expect(s.untrusted).toBe(0);
	});
});
