import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadEncryptionKey, open, parseEncryptionKey, seal } from "../../src/cluster/encryption.js";
import { CertificateeError } from "../../src/errors.js";
import { sealFormat1 } from "../harness/etcd.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-cluster-key-"));
const key = randomBytes(32);

function file(name: string, text: string): string {
	const p = join(dir, name);
	writeFileSync(p, text, { mode: 0o600 });
	return p;
}

function thrown(fn: () => unknown): CertificateeError {
	try {
		fn();
	} catch (e) {
		expect(e).toBeInstanceOf(CertificateeError);
		return e as CertificateeError;
	}
	throw new Error("expected an error");
}

describe("cluster/encryption", () => {
	it.each([
		["base64 with its newline", `${key.toString("base64")}\n`],
		["base64url", key.toString("base64url")],
		["hex", key.toString("hex")],
		["HEX with spaces around", `  ${key.toString("hex").toUpperCase()}  \n`],
	])("reads a key in %s", (_what, text) => {
		expect(parseEncryptionKey(text)).toEqual(key);
	});

	it.each([
		["16 bytes", randomBytes(16).toString("base64")],
		["33 bytes", randomBytes(33).toString("base64")],
		["a passphrase", "correct horse battery staple"],
		["empty", ""],
	])("refuses %s", (_what, text) => {
		expect(parseEncryptionKey(text)).toBeUndefined();
	});

	it("loads the key from the file, else from CERTIFICATEE_ENCRYPTION_KEY", () => {
		const other = randomBytes(32);
		const env = { CERTIFICATEE_ENCRYPTION_KEY: other.toString("hex") };
		expect(loadEncryptionKey(file("k1", key.toString("base64")), env)).toEqual(key);
		expect(loadEncryptionKey(undefined, env)).toEqual(other);
	});

	it("without either: CONFIG_INVALID naming the field, with how to make one", () => {
		const e = thrown(() => loadEncryptionKey(undefined, {}));
		expect(e.code).toBe("CONFIG_INVALID");
		expect(e.message).toContain("cluster.encryption_key_file is required");
		expect(e.context.field).toBe("cluster.encryption_key_file");
		expect(e.hint).toContain("head -c 32 /dev/urandom | base64 > /etc/certificatee/cluster.key");
	});

	it("a key of the wrong size never shows in the error", () => {
		const secret = randomBytes(24).toString("base64");
		const fromFile = thrown(() => loadEncryptionKey(file("short", secret), {}));
		expect(fromFile).toMatchObject({
			code: "CONFIG_INVALID",
			context: { field: "cluster.encryption_key_file" },
		});
		expect(fromFile.message).toContain("does not hold a 32-byte key");
		const fromEnv = thrown(() => loadEncryptionKey(undefined, { CERTIFICATEE_ENCRYPTION_KEY: secret }));
		expect(fromEnv.code).toBe("CONFIG_INVALID");
		expect(fromEnv.message).toContain("CERTIFICATEE_ENCRYPTION_KEY");
		for (const e of [fromFile, fromEnv])
			expect(JSON.stringify({ ...e.toJSON(), stack: e.stack })).not.toContain(secret);
	});

	it("an unreadable file is CONFIG_SECRET_UNREADABLE naming the file and the field", () => {
		const missing = thrown(() => loadEncryptionKey(join(dir, "missing"), {}));
		expect(missing).toMatchObject({
			code: "CONFIG_SECRET_UNREADABLE",
			context: { file: join(dir, "missing"), field: "cluster.encryption_key_file" },
		});
		expect(missing.message).toContain("ENOENT");
		if (process.getuid?.() !== 0) {
			const locked = file("locked", key.toString("hex"));
			chmodSync(locked, 0o000);
			expect(thrown(() => loadEncryptionKey(locked, {})).code).toBe("CONFIG_SECRET_UNREADABLE");
		}
	});

	it("seals for one record of one cluster at one version: opens with the same key, prefix, name and version only, and not once changed", () => {
		const plain = Buffer.from('{"keyPem":"-----BEGIN PRIVATE KEY-----"}');
		const a = { prefix: "certificatee/", key: "certificates/a" };
		const sealed = seal(key, a, 3, plain);
		expect(sealed).toMatchObject({ v: 2, alg: "A256GCM", seq: 3 });
		expect(open(key, a, sealed)).toEqual({ plain, seq: 3 });
		expect(open(randomBytes(32), a, sealed)).toBeUndefined();
		expect(open(key, { ...a, key: "certificates/b" }, sealed)).toBeUndefined();
		expect(open(key, { ...a, prefix: "other-cluster/" }, sealed)).toBeUndefined();
		// The version is authenticated: an older value relabelled as a newer version does not open.
		expect(open(key, a, { ...sealed, seq: 4 })).toBeUndefined();
		const data = Buffer.from(sealed.data, "base64");
		data[0] = (data[0] ?? 0) ^ 1;
		expect(open(key, a, { ...sealed, data: data.toString("base64") })).toBeUndefined();
		expect(open(key, a, { ...sealed, nonce: "AAAA" })).toBeUndefined();
		expect(open(key, a, { v: 2, alg: "A256GCM", nonce: sealed.nonce, data: sealed.data })).toBeUndefined();
		expect(open(key, a, { ...sealed, v: 3 })).toBeUndefined();
	});

	it("still opens format 1 (the state key as associated data), without a version", () => {
		const plain = Buffer.from('{"a":1}');
		const legacy = sealFormat1(key, "certificates/a", plain);
		expect(open(key, { prefix: "p/", key: "certificates/a" }, legacy)).toEqual({ plain });
		expect(open(key, { prefix: "p/", key: "certificates/b" }, legacy)).toBeUndefined();
	});
});
