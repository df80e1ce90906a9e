/**
 * A state directory laid out the old way (issuers' own files: acme/<issuer>/account.*, local-ca/<issuer>/ca.*)
 * becomes state store records when the file store opens it with its lock; the issuers then work from the
 * records: the same ACME account, the same local CA root, signing leaves that chain to it.
 */
import { X509Certificate } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../src/errors.js";
import { storedAccount } from "../../src/sources/acme/account.js";
import { createLocalCaIssuer, localCaSourceSchema } from "../../src/sources/local-ca/index.js";
import { openFileStore } from "../../src/store/file-store.js";
import { readAccountRecord, readAuthorityRecord, readRevocations } from "../../src/store/records.js";
import { createTestCa } from "../harness/certs.js";

const ACCOUNT_KEY = "-----BEGIN PRIVATE KEY-----\nold account key\n-----END PRIVATE KEY-----\n";
const NEXT_KEY = "-----BEGIN PRIVATE KEY-----\nnext account key\n-----END PRIVATE KEY-----\n";
const revocation = {
	serial: "0a1b",
	subject: "CN=old.test",
	reason: "keyCompromise",
	revokedAt: "2026-01-02T03:04:05.000Z",
};

let dir: string;
beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-legacy-"));
});
afterEach(async () => {
	await rm(dir, { recursive: true, force: true });
});

/** Writes files as the issuers did before the store kept their state (each 0600, as they wrote them). */
async function oldFiles(files: Record<string, string>): Promise<void> {
	for (const [path, content] of Object.entries(files)) {
		await mkdir(join(dir, path, ".."), { recursive: true });
		await writeFile(join(dir, path), content, { mode: 0o600 });
	}
}

async function oldCa(name: string) {
	const ca = await createTestCa(`Old ${name} CA`);
	await oldFiles({
		[`local-ca/${name}/ca.crt`]: ca.certPem,
		[`local-ca/${name}/ca.key`]: ca.keyPem,
		[`local-ca/${name}/revoked.json`]: JSON.stringify([revocation]),
	});
	return ca;
}

describe("store/legacy: the old layout moves into records once", () => {
	it("an ACME account and a local CA become accounts/<issuer>, authorities/<issuer> and revocations/<issuer>", async () => {
		await oldFiles({
			"acme/le/account.key": ACCOUNT_KEY,
			"acme/le/account.json": JSON.stringify({
				directory_url: "https://ca.test/dir",
				account_url: "https://ca.test/acct/7",
				contact: ["mailto:ops@example.com"],
			}),
			"acme/le/account.next.key": NEXT_KEY,
		});
		const ca = await oldCa("internal");
		const store = await openFileStore(dir);
		try {
			expect((await readAccountRecord(store, "le"))?.value).toEqual({
				keyPem: ACCOUNT_KEY,
				directoryUrl: "https://ca.test/dir",
				accountUrl: "https://ca.test/acct/7",
				contact: ["mailto:ops@example.com"],
				nextKeyPem: NEXT_KEY,
			});
			expect((await readAuthorityRecord(store, "internal"))?.value).toEqual({
				certPem: ca.certPem,
				keyPem: ca.keyPem,
			});
			expect((await readRevocations(store, "internal"))?.value).toEqual({ revoked: [revocation] });
			// The old files are gone, the records are 0600 (they hold the keys).
			expect((await readdir(dir)).sort()).toEqual([".lock", "accounts", "authorities", "revocations"]);
			for (const f of ["accounts/le.json", "authorities/internal.json"])
				expect((await stat(join(dir, f))).mode & 0o777).toBe(0o600);

			// The issuers work from the records: the same account, the same root signing new leaves.
			const account = await storedAccount(store, "le").load();
			expect(account?.key.reveal()).toBe(ACCOUNT_KEY);
			expect(account?.nextKey?.reveal()).toBe(NEXT_KEY);
			const issuer = createLocalCaIssuer(localCaSourceSchema.parse({ name: "internal", type: "local-ca" }), {
				store,
			});
			expect(await issuer.exportRoot()).toBe(ca.certPem);
			const leaf = await issuer.issue(
				{ certificate: "web", domains: ["web.test"], keyType: "ecdsa-p256" },
				new AbortController().signal,
			);
			expect(new X509Certificate(leaf.certPem).verify(new X509Certificate(ca.certPem).publicKey)).toBe(true);
		} finally {
			store.close();
		}
		// Once done, a second open finds nothing to move and changes nothing.
		const again = await openFileStore(dir);
		expect((await again.get("accounts/le"))?.version).toBe(1);
		again.close();
	});

	it("a record that exists wins over old files found beside it (a crash between writing it and removing them)", async () => {
		const store = await openFileStore(dir);
		const current = createLocalCaIssuer(localCaSourceSchema.parse({ name: "internal", type: "local-ca" }), {
			store,
		});
		const root = await current.exportRoot();
		store.close();
		await oldCa("internal");
		const reopened = await openFileStore(dir);
		try {
			expect((await readAuthorityRecord(reopened, "internal"))?.value.certPem).toBe(root);
			await expect(readdir(join(dir, "local-ca"))).rejects.toMatchObject({ code: "ENOENT" });
		} finally {
			reopened.close();
		}
	});

	it("names that are not plain key segments are escaped; a CA missing its key is left where it is", async () => {
		await oldCa("my ca");
		await oldFiles({ "local-ca/half/ca.crt": "only a certificate" });
		const store = await openFileStore(dir);
		try {
			expect(await store.list("authorities/")).toEqual(["authorities/x_my_20ca"]);
			expect(await readdir(join(dir, "local-ca"))).toEqual(["half"]);
		} finally {
			store.close();
		}
	});

	it("a read-only open (plan, status) moves nothing", async () => {
		await oldCa("internal");
		const store = await openFileStore(dir, { readOnly: true });
		expect(await store.list("")).not.toContain("authorities/internal");
		store.close();
		expect((await readdir(join(dir, "local-ca", "internal"))).sort()).toEqual([
			"ca.crt",
			"ca.key",
			"revoked.json",
		]);
	});

	it("a corrupt old account.json fails the open naming the file, without a key in the message, and releases the lock", async () => {
		await oldFiles({
			"acme/le/account.key": ACCOUNT_KEY,
			"acme/le/account.json": `{"account_url": 7, "k": "${ACCOUNT_KEY}"`,
		});
		const error = await openFileStore(dir).catch((e: unknown) => e);
		expect(isCertificateeError(error, "STATE_CORRUPT")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.context.file).toBe(join(dir, "acme", "le", "account.json"));
		expect(error.hint).toContain("remove it");
		expect(`${error.message} ${error.hint} ${String(error.cause ?? "")}`).not.toContain("old account key");
		// Nothing was moved, and the directory is not left locked.
		expect(await readFile(join(dir, "acme", "le", "account.key"), "utf8")).toBe(ACCOUNT_KEY);
		await rm(join(dir, "acme", "le", "account.json"));
		const store = await openFileStore(dir);
		expect((await readAccountRecord(store, "le"))?.value).toEqual({ keyPem: ACCOUNT_KEY });
		store.close();
	});
});
