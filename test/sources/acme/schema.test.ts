/** The `type: acme` config schema and the file account store, without a CA. */
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Secret } from "../../../src/certificates/types.js";
import { isCertificateeError } from "../../../src/errors.js";
import { acmeSourceSchema, storedAccount } from "../../../src/sources/acme/index.js";
import { closeStateAt, stateAt } from "../../harness/state.js";

const minimal = { name: "le", type: "acme", directory_url: "https://acme.example/dir" };
const rfc2136 = {
	server: "10.0.0.53:53",
	zone: "example.com",
	tsig_key_name: "certificatee",
	tsig_secret_file: "/etc/certificatee/tsig.key",
};

describe("acmeSourceSchema", () => {
	it("fills every default", () => {
		expect(acmeSourceSchema.parse(minimal)).toEqual({
			...minimal,
			agree_tos: true,
			dns_hook_timeout: 60_000,
			dns_propagation_wait: 0,
			concurrency: 4,
			poll_interval: 1000,
			timeout: 300_000,
			http_retries: 2,
		});
	});

	it("fills the defaults of dns01.rfc2136", () => {
		expect(acmeSourceSchema.parse({ ...minimal, dns01: { rfc2136 } }).dns01).toEqual({
			rfc2136: {
				...rfc2136,
				tsig_algorithm: "hmac-sha256",
				ttl: 60,
				timeout: 10_000,
				propagation_timeout: 120_000,
			},
		});
	});

	it.each([
		[{ ...minimal, directory_url: "ftp://x/dir" }, "directory_url"],
		[{ ...minimal, unknown_key: 1 }, "unknown_key"],
		[{ ...minimal, key_type: "rsa-2048" }, "key_type"],
		[{ ...minimal, email: "not-an-email" }, "email"],
		[{ ...minimal, http01: { listen: "8402" } }, "http01.listen"],
		[{ ...minimal, dns_hook: [] }, "dns_hook"],
		[{ ...minimal, timeout: "5 minutes" }, "timeout"],
		[{ ...minimal, concurrency: 0 }, "concurrency"],
		[{ ...minimal, eab: { kid: "k" } }, "eab"],
		[{ ...minimal, eab: { kid: "k", hmac_key: "a", hmac_key_file: "/f" } }, "eab"],
		[{ ...minimal, dns_hook: ["/bin/true"], dns01: { rfc2136: rfc2136 } }, "dns01"],
		[{ ...minimal, dns01: { rfc2136: { ...rfc2136, server: "10.0.0.53:dns" } } }, "dns01.rfc2136.server"],
		[
			{ ...minimal, dns01: { rfc2136: { ...rfc2136, tsig_algorithm: "hmac-md5" } } },
			"dns01.rfc2136.tsig_algorithm",
		],
		[{ ...minimal, dns01: { rfc2136: { ...rfc2136, tsig_secret: "c2VjcmV0" } } }, "dns01.rfc2136"],
		[{ ...minimal, dns01: { rfc2136: { ...rfc2136, zone: "not a zone" } } }, "dns01.rfc2136.zone"],
	])("rejects %j at %s", (input, where) => {
		const result = acmeSourceSchema.safeParse(input);
		expect(result.success).toBe(false);
		const paths = result.error?.issues.map((i) =>
			i.path.length ? i.path.join(".") : (i as { keys?: string[] }).keys?.join("."),
		);
		expect(paths).toContain(where);
	});
});

describe("storedAccount (the accounts/<issuer> record)", () => {
	let dir: string;
	beforeAll(async () => {
		dir = await mkdtemp(path.join(tmpdir(), "certificatee-account-store-"));
	});
	afterAll(async () => {
		await closeStateAt(dir);
		await rm(dir, { recursive: true, force: true });
	});

	it("round-trips an account in a 0600 record and writes nothing when nothing changed", async () => {
		const store = storedAccount(stateAt(dir), "a");
		expect(await store.load()).toBeUndefined();
		const account = {
			key: new Secret("-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n"),
			directoryUrl: "https://ca/dir",
			accountUrl: "https://ca/acct/1",
		};
		await store.save(account);
		const loaded = await store.load();
		expect(loaded?.key.reveal()).toBe(account.key.reveal());
		expect(loaded?.accountUrl).toBe("https://ca/acct/1");
		const file = path.join(dir, "accounts", "a.json");
		const before = await stat(file);
		expect(before.mode & 0o777).toBe(0o600);
		expect((await stat(path.join(dir, "accounts"))).mode & 0o777).toBe(0o700);
		await store.save(account);
		expect((await stat(file)).ino).toBe(before.ino);
		expect(JSON.parse(await readFile(file, "utf8")).version).toBe(1);
		expect(JSON.stringify(loaded)).not.toContain("PRIVATE KEY");
	});

	it("reports a corrupt account record as STATE_CORRUPT naming the file", async () => {
		const store = storedAccount(stateAt(dir), "b");
		await store.save({ key: new Secret("k") });
		const file = path.join(dir, "accounts", "b.json");
		await writeFile(file, JSON.stringify({ version: 1, value: { keyPem: "k", accountUrl: 7 } }));
		const error = await store.load().catch((e: unknown) => e);
		expect(isCertificateeError(error, "STATE_CORRUPT")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.context.file).toBe(file);
		expect(error.message).not.toContain('"k"');
	});
});
