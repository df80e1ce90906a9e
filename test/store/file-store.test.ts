import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isTempName } from "../../src/base/atomic-file.js";
import { isCertificateeError } from "../../src/errors.js";
import { type FileStore, openFileStore } from "../../src/store/file-store.js";
import {
	HISTORY_LIMIT,
	readCertificateRecord,
	readRenewalRecord,
	storeIssued,
} from "../../src/store/records.js";

const CHILD = join(import.meta.dirname, "store-child.ts");

function runChild(args: string[]) {
	return spawn(process.execPath, ["--import", "tsx", CHILD, ...args], { stdio: ["ignore", "pipe", "pipe"] });
}

async function allFiles(dir: string): Promise<string[]> {
	const out: string[] = [];
	for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
		if (e.isFile()) out.push(join(e.parentPath, e.name));
	}
	return out;
}

let dir: string;
let store: FileStore | undefined;
beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-store-"));
});
afterEach(async () => {
	store?.close();
	store = undefined;
	await rm(dir, { recursive: true, force: true });
});

describe("store/file-store: a write that fails", () => {
	it("is STATE_UNWRITABLE, retryable, naming the file (a full disk, here a file-size limit: EFBIG), and the record is unchanged", async () => {
		const first = await openFileStore(dir);
		await first.put("renewal/web", { small: true }, 0);
		first.close();
		// The child may write 512 bytes per file (ulimit -f 1): the lock's pid fits, the 64 KiB record does not.
		const child = spawn(
			"sh",
			["-c", `ulimit -f 1; exec "${process.execPath}" --import tsx "${CHILD}" put-big "${dir}"`],
			{
				stdio: ["ignore", "pipe", "pipe"],
			},
		);
		let out = "";
		child.stdout.on("data", (d: Buffer) => {
			out += d.toString();
		});
		await new Promise((resolve) => child.once("exit", resolve));
		const error = JSON.parse(out.trim()) as {
			code?: string;
			retryable?: boolean;
			message?: string;
			hint?: string;
		};
		expect(error).toMatchObject({ code: "STATE_UNWRITABLE", retryable: true });
		expect(error.message).toContain(join(dir, "renewal", "web.json"));
		expect(error.message).toContain("EFBIG");
		expect(error.hint).toBeTruthy();
		store = await openFileStore(dir);
		expect(await store.get("renewal/web")).toEqual({ version: 1, value: { small: true } });
	});
});

describe("store/file-store", () => {
	it("puts with compare-and-swap, lists and watches", async () => {
		store = await openFileStore(dir);
		const seen: string[] = [];
		const stop = store.watch("certificates/", (k) => seen.push(k));
		expect(await store.get("certificates/a")).toBeUndefined();
		expect(await store.put("certificates/a", { n: 1 }, 0)).toBe(1);
		expect(await store.put("certificates/a", { n: 2 }, 1)).toBe(2);
		await expect(store.put("certificates/a", { n: 3 }, 1)).rejects.toMatchObject({ code: "STATE_CONFLICT" });
		await expect(store.put("certificates/b", { n: 1 }, 4)).rejects.toMatchObject({ code: "STATE_CONFLICT" });
		await store.put("certificates/b", { n: 1 }, 0);
		await store.put("renewal/a", { n: 1 }, 0);
		stop();
		await store.put("certificates/c", {}, 0);
		expect(await store.get("certificates/a")).toEqual({ version: 2, value: { n: 2 } });
		expect(await store.list("certificates/")).toEqual(["certificates/a", "certificates/b", "certificates/c"]);
		expect(await store.list("")).toEqual(["certificates/a", "certificates/b", "certificates/c", "renewal/a"]);
		expect(seen).toEqual(["certificates/a", "certificates/a", "certificates/b"]);
		const mode = (await stat(join(dir, "certificates", "a.json"))).mode & 0o777;
		expect(mode).toBe(0o600);
		await expect(store.put("../escape", {}, 0)).rejects.toThrow(/invalid state key/);
	});

	it("lets exactly one of two concurrent writers with the same expected version win", async () => {
		store = await openFileStore(dir);
		const results = await Promise.allSettled([store.put("k", "a", 0), store.put("k", "b", 0)]);
		expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
	});

	it("keeps the last 3 issued certificates per name", async () => {
		store = await openFileStore(dir);
		for (let i = 1; i <= 5; i++) {
			const previous = await readCertificateRecord(store, "web");
			await storeIssued(
				store,
				"web",
				{
					certPem: `cert ${i}`,
					chainPem: "",
					keyPem: `key ${i}`,
					issuer: "local",
					domains: ["a.test"],
					keyType: "ecdsa-p256",
					serial: `0${i}`,
					notBefore: new Date(0).toISOString(),
					notAfter: new Date(i * 1000).toISOString(),
					issuedAt: new Date(0).toISOString(),
				},
				previous,
			);
		}
		const record = await readCertificateRecord(store, "web");
		expect(record?.value.history.map((h) => h.serial)).toEqual(["05", "04", "03"]);
		expect(HISTORY_LIMIT).toBe(3);
	});

	it("writes records 0600 and reports a record of the wrong shape as STATE_CORRUPT", async () => {
		store = await openFileStore(dir);
		expect(await store.put("certificates/secret", { keyPem: "k" }, 0)).toBe(1);
		expect((await stat(join(dir, "certificates", "secret.json"))).mode & 0o777).toBe(0o600);
		await store.put("renewal/web", { failures: "many" }, 0);
		await expect(readRenewalRecord(store, "web")).rejects.toMatchObject({ code: "STATE_CORRUPT" });
		await writeFile(join(dir, "renewal", "torn.json"), '{"version": 1, "value": {');
		await expect(store.get("renewal/torn")).rejects.toMatchObject({ code: "STATE_CORRUPT" });
	});

	it("reports a torn record that holds a key without any of its text, in message, hint or cause", async () => {
		store = await openFileStore(dir);
		const secret = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg";
		await store.put("certificates/web", { keyPem: "x" }, 0);
		await writeFile(
			join(dir, "certificates", "web.json"),
			`{"version": 1, "value": {"keyPem": "-----BEGIN PRIVATE KEY-----\\n${secret}`,
		);
		const error = await store.get("certificates/web").catch((e: unknown) => e);
		expect(isCertificateeError(error, "STATE_CORRUPT")).toBe(true);
		const e = error as Error & { hint?: string; cause?: unknown };
		expect(e.message).toContain(join(dir, "certificates", "web.json"));
		expect(JSON.stringify([e.message, e.hint, String(e.cause ?? ""), e.stack])).not.toContain(secret);
		expect(JSON.stringify([e.message, e.hint])).not.toContain("PRIVATE KEY");
		// The parser's own error is dropped, not carried as the cause: newer V8 versions quote the text around
		// the syntax error (Node 20's says only the position, which the message keeps).
		expect(e.cause).toBeUndefined();
		expect(e.message).toMatch(/at position \d+/);
	});

	it("refuses a second process on the same state directory with STATE_LOCKED", async () => {
		store = await openFileStore(dir);
		const child = runChild(["open", dir]);
		let out = "";
		child.stdout.on("data", (d) => {
			out += String(d);
		});
		const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
		expect(code).toBe(3);
		expect(out).toContain("STATE_LOCKED");
		expect(out).toContain(`pid ${process.pid}`);
		// and in-process too
		await expect(openFileStore(dir)).rejects.toSatisfy((e) => isCertificateeError(e, "STATE_LOCKED"));
		// A read-only opener (plan, status) reads beside the holder but cannot write.
		await store.put("certificates/a", { n: 1 }, 0);
		const reader = await openFileStore(dir, { readOnly: true });
		expect(await reader.get("certificates/a")).toEqual({ version: 1, value: { n: 1 } });
		await expect(reader.put("certificates/a", {}, 1)).rejects.toMatchObject({ code: "STATE_LOCKED" });
		reader.close();
	});

	it("survives kill -9 during writes: no partial file, the lock is free again, leftovers are removed", async () => {
		const rounds = 20;
		let tempSeen = 0;
		for (let round = 0; round < rounds; round++) {
			const child = runChild(["write", dir]);
			const exited = new Promise((resolve) => child.on("exit", resolve));
			await new Promise<void>((resolve, reject) => {
				child.stdout.on("data", (d) => String(d).includes("ready") && resolve());
				child.on("exit", (c) => reject(new Error(`child exited early with ${c}`)));
			});
			await new Promise((r) => setTimeout(r, 20 + Math.floor(Math.random() * 150)));
			child.kill("SIGKILL");
			await exited;
			for (const file of await allFiles(dir)) {
				const name = file.slice(file.lastIndexOf("/") + 1);
				if (isTempName(name)) {
					tempSeen += 1;
					continue;
				}
				if (name === ".lock") continue;
				const parsed = JSON.parse(await readFile(file, "utf8")) as {
					value: { payload: string; sum: string };
				};
				expect(createHash("sha256").update(parsed.value.payload).digest("hex")).toBe(parsed.value.sum);
			}
		}
		store = await openFileStore(dir);
		const keys = await store.list("round/");
		expect(keys.length).toBeGreaterThan(0);
		let writes = 0;
		for (const key of keys) writes += (await store.get(key))?.version ?? 0;
		// Every round was killed while writing in a loop, so the versions add up to more than the rounds.
		expect(writes).toBeGreaterThan(rounds);
		expect((await allFiles(dir)).filter((f) => isTempName(basename(f)))).toEqual([]);
		console.log(`kill -9 rounds: ${rounds}, completed writes: ${writes}, temp files left: ${tempSeen}`);
	});
});
