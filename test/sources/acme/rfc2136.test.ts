/**
 * RFC 2136 updates with TSIG against a real BIND 9: records really appear and disappear on the server, every
 * algorithm signs as named expects, and each way of getting the key wrong is a clear DNS_UPDATE_FAILED.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CertificateeError } from "../../../src/errors.js";
import {
	exchangeTcp,
	parseDnsServer,
	parseResponse,
	updateMessage,
} from "../../../src/sources/acme/dns-wire.js";
import { createRfc2136Publisher, readTsigSecret } from "../../../src/sources/acme/rfc2136.js";
import { rfc2136Schema } from "../../../src/sources/acme/schema.js";
import { signMessage, verifyResponse } from "../../../src/sources/acme/tsig.js";
import { type BindHandle, startBind } from "../../harness/bind.js";
import { failure } from "../../harness/failure.js";
import { expectNoKeyMaterial } from "../../harness/no-secrets.js";

let bind: BindHandle;
let dir: string;

beforeAll(async () => {
	bind = await startBind({
		zone: "example.test",
		keys: [
			{ name: "certificatee", algorithm: "hmac-sha256" },
			{ name: "big", algorithm: "hmac-sha512" },
			{ name: "old", algorithm: "hmac-sha1" },
			{ name: "reader", algorithm: "hmac-sha256", grant: false },
		],
	});
	dir = await mkdtemp(path.join(tmpdir(), "certificatee-rfc2136-"));
});

afterAll(async () => {
	await bind?.stop();
	if (dir) await rm(dir, { recursive: true, force: true });
});

function publisher(extra: Record<string, unknown> = {}) {
	const key = (extra.tsig_key_name as string | undefined) ?? "certificatee";
	const config = rfc2136Schema.parse({
		server: bind.address,
		zone: "example.test",
		tsig_key_name: key,
		tsig_secret_file: bind.secretFile(bind.keys.some((k) => k.name === key) ? key : "certificatee"),
		timeout: "5s",
		propagation_timeout: "10s",
		...extra,
	});
	return { config, hook: createRfc2136Publisher(config, readTsigSecret(config.tsig_secret_file)) };
}

const served = (name: string) => bind.txt(name);

const signal = () => AbortSignal.timeout(20_000);

function expectNoSecret(error: CertificateeError, secretFile: string): void {
	const secret = readFileSync(secretFile, "utf8").trim();
	const shown = `${error.message}\n${error.hint}\n${JSON.stringify(error)}`;
	expect(shown).not.toContain(secret);
	expect(shown).not.toContain(secret.slice(0, 12));
	expectNoKeyMaterial(shown);
}

describe("RFC 2136 updates against BIND 9", () => {
	it("adds two values to one name (a name and its wildcard), then deletes exactly one, then the other", async () => {
		const { hook } = publisher();
		const name = "_acme-challenge.both.example.test";
		await hook.run("set", name, "value-for-apex", signal());
		await hook.run("set", name, "value-for-wildcard", signal());
		expect(await served(name)).toEqual(["value-for-apex", "value-for-wildcard"]);
		await hook.run("clear", name, "value-for-apex", signal());
		expect(await served(name)).toEqual(["value-for-wildcard"]);
		await hook.run("clear", name, "value-for-wildcard", signal());
		expect(await served(name)).toEqual([]);
	});

	it.each([
		["big", "hmac-sha512"],
		["old", "hmac-sha1"],
	])("signs with key %s (%s) as named expects", async (key, algorithm) => {
		const { hook } = publisher({ tsig_key_name: key, tsig_algorithm: algorithm });
		const name = `_acme-challenge.${key}.example.test`;
		await hook.run("set", name, `v-${key}`, signal());
		expect(await served(name)).toEqual([`v-${key}`]);
		await hook.run("clear", name, `v-${key}`, signal());
		expect(await served(name)).toEqual([]);
	});

	it("verifies named's signed answer, and calls a changed byte of it forged", async () => {
		const key = {
			name: "certificatee",
			algorithm: "hmac-sha256" as const,
			secret: readTsigSecret(bind.secretFile("certificatee")),
		};
		const now = Math.floor(Date.now() / 1000);
		const change = {
			action: "delete" as const,
			name: "_acme-challenge.none.example.test",
			value: "x",
			ttl: 0,
		};
		const signed = signMessage(updateMessage("example.test", [change]), key, now);
		const answer = await exchangeTcp(parseDnsServer(bind.address), signed.message, signal());
		expect(parseResponse(answer).rcode).toBe("NOERROR");
		expect(verifyResponse(answer, key, signed.mac, now)).toEqual({ kind: "verified" });
		const tampered = Buffer.from(answer);
		tampered[3]! ^= 0x80; // the RA bit, covered by the MAC
		expect(verifyResponse(tampered, key, signed.mac, now)).toEqual({
			kind: "forged",
			why: "the response's MAC does not verify",
		});
		expect(verifyResponse(answer, key, Buffer.alloc(32), now).kind).toBe("forged");
	});

	it("a wrong secret is BADSIG, naming server, zone and the secret file, and never showing a secret", async () => {
		const wrong = path.join(dir, "wrong.secret");
		await writeFile(wrong, `${Buffer.alloc(32, 7).toString("base64")}\n`, { mode: 0o600 });
		const { hook } = publisher({ tsig_secret_file: wrong });
		const error = await failure(hook.run("set", "_acme-challenge.bad.example.test", "v", signal()));
		expect(error.code).toBe("DNS_UPDATE_FAILED");
		expect(error.message).toBe(
			`RFC 2136 add of TXT _acme-challenge.bad.example.test in zone example.test at ${bind.address}: the server rejected the TSIG signature (NOTAUTH, BADSIG)`,
		);
		expect(error.hint).toContain(`the secret in ${wrong}`);
		expect(error.hint).toContain('tsig_key_name ("certificatee")');
		expect(error.context.endpoint).toBe(bind.address);
		expect(error.retryable).toBe(false);
		expectNoSecret(error, wrong);
		expectNoSecret(error, bind.secretFile("certificatee"));
		expect(await served("_acme-challenge.bad.example.test")).toEqual([]);
	});

	it("an unknown key name is BADKEY; a key without update rights is REFUSED with the update-policy to add", async () => {
		const unknown = await failure(
			publisher({ tsig_key_name: "nobody" }).hook.run("set", "_acme-challenge.k.example.test", "v", signal()),
		);
		expect(unknown.code).toBe("DNS_UPDATE_FAILED");
		expect(unknown.message).toContain("the server rejected the TSIG signature (NOTAUTH, BADKEY)");
		expect(unknown.hint).toContain('the server knows no key "nobody" with algorithm hmac-sha256');

		const refused = await failure(
			publisher({ tsig_key_name: "reader" }).hook.run("set", "_acme-challenge.k.example.test", "v", signal()),
		);
		expect(refused.message).toBe(
			`RFC 2136 add of TXT _acme-challenge.k.example.test in zone example.test at ${bind.address}: the server answered REFUSED`,
		);
		expect(refused.hint).toContain("update-policy { grant reader zonesub TXT; };");
		expectNoSecret(refused, bind.secretFile("reader"));
	});

	it("refuses a name outside the zone before sending anything, and names an unreachable server", async () => {
		const outside = await failure(publisher().hook.run("set", "_acme-challenge.other.test", "v", signal()));
		expect(outside.message).toContain("the name is not inside zone example.test");
		expect(outside.hint).toBe("set dns01.rfc2136.zone to the zone that holds _acme-challenge.other.test");

		// Port 1: privileged and unused on loopback, so the connection is refused.
		const down = await failure(
			publisher({ server: "127.0.0.1:1" }).hook.run("set", "_acme-challenge.x.example.test", "v", signal()),
		);
		expect(down.message).toBe(
			"RFC 2136 add of TXT _acme-challenge.x.example.test in zone example.test at 127.0.0.1:1: ECONNREFUSED",
		);
		expect(down.retryable).toBe(true);
	});

	it("a server that accepts the connection but never answers is a timeout naming it", async () => {
		const silent = net.createServer((s) => s.resume()); // reads every request, answers nothing
		await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
		const address = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
		try {
			const error = await failure(
				publisher({ server: address, timeout: "200ms" }).hook.run(
					"set",
					"_acme-challenge.mute.example.test",
					"v",
					signal(),
				),
			);
			expect(error.message).toBe(
				`RFC 2136 add of TXT _acme-challenge.mute.example.test in zone example.test at ${address}: no answer within 200 ms`,
			);
			expect(error.retryable).toBe(true);
		} finally {
			await new Promise((r) => silent.close(r)); // our side closed its socket at the deadline
		}
	});

	it("set waits for every check server; one that never answers fails after propagation_timeout and takes the value back", async () => {
		const { hook } = publisher({
			check_servers: [bind.address, "127.0.0.1:1"],
			propagation_timeout: "300ms",
		});
		const name = "_acme-challenge.slow.example.test";
		const error = await failure(hook.run("set", name, "v", signal()));
		expect(error.code).toBe("DNS_UPDATE_FAILED");
		expect(error.message).toBe(
			`RFC 2136 check of TXT ${name} in zone example.test: the new value is not visible on 127.0.0.1:1 after 300 ms; 127.0.0.1:1: ECONNREFUSED`,
		);
		expect(error.retryable).toBe(true);
		expect(await served(name)).toEqual([]);
	});

	it("by default also checks the zone's NS as the server lists them, on the server's port", async () => {
		const name = "_acme-challenge.ns.example.test";
		// A zone whose NS (ns1.example.test A 127.0.0.3) answers nothing: the value is never seen there.
		const deaf = await startBind({ zone: "example.test", nsAddress: "127.0.0.3" });
		try {
			const config = rfc2136Schema.parse({
				server: deaf.address,
				zone: "example.test",
				tsig_key_name: "certificatee",
				tsig_secret_file: deaf.secretFile("certificatee"),
				propagation_timeout: "300ms",
			});
			const hook = createRfc2136Publisher(config, readTsigSecret(config.tsig_secret_file));
			const error = await failure(hook.run("set", name, "v", signal()));
			expect(error.message).toBe(
				`RFC 2136 check of TXT ${name} in zone example.test: the new value is not visible on 127.0.0.3:${deaf.port} after 300 ms; 127.0.0.3:${deaf.port}: ECONNREFUSED`,
			);
			expect(await deaf.txt(name)).toEqual([]);
		} finally {
			await deaf.stop();
		}
	});
});

describe("readTsigSecret", () => {
	it("reads bare base64 and tsig-keygen's key file; names the file when missing or not base64", async () => {
		const bare = path.join(dir, "bare");
		await writeFile(bare, "c2VjcmV0LXNlY3JldC1zZWNyZXQ=\n", { mode: 0o600 });
		expect(readTsigSecret(bare).toString()).toBe("secret-secret-secret");
		const keyFile = path.join(dir, "bind.key");
		await writeFile(
			keyFile,
			'key "certificatee" {\n\talgorithm hmac-sha256;\n\tsecret "c2VjcmV0LXNlY3JldC1zZWNyZXQ=";\n};\n',
			{ mode: 0o600 },
		);
		expect(readTsigSecret(keyFile).toString()).toBe("secret-secret-secret");

		const missing = path.join(dir, "missing.key");
		expect(() => readTsigSecret(missing)).toThrow(
			expect.objectContaining({
				code: "CONFIG_SECRET_UNREADABLE",
				message: `dns01.rfc2136.tsig_secret_file ${missing} cannot be read: ENOENT`,
			}),
		);
		const text = path.join(dir, "not-base64");
		await writeFile(text, "hunter2 is my password!\n", { mode: 0o600 });
		let caught: unknown;
		try {
			readTsigSecret(text);
		} catch (e) {
			caught = e;
		}
		expect(caught).toMatchObject({
			code: "CONFIG_SECRET_UNREADABLE",
			message: `dns01.rfc2136.tsig_secret_file ${text} does not hold a base64 secret`,
		});
		expect(JSON.stringify(caught)).not.toContain("hunter2");
	});
});
