/**
 * Issue 25, finding 9: the scrubber removes every secret kind, by value (what the configuration loaded) and
 * by shape, from errors, stderr tails and log lines; and keeps what an operator needs (paths, serials,
 * fingerprints, HAProxy's words).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { loadEncryptionKey } from "../src/cluster/encryption.js";
import { interpolate } from "../src/config/interpolate.js";
import { CertificateeError, scrubSecrets } from "../src/errors.js";
import { createLogger } from "../src/log.js";
import { readTsigSecret } from "../src/sources/acme/rfc2136.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-scrub-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The first body line of a SEC1 P-256 key: it holds the whole private scalar.
const SEC1_LINE = "MHcCAQEEIBkg4LVWM9nuwNSk3yRxmRbvL1Gn8D6NMqGEyfGjvdNUoAoGCCqGSM49";
const TSIG = "kM1v0q3t2Wbq8Yf4uZlP3N0yTz5aXc7dRrE9sJhKgAo=";

describe("scrubSecrets", () => {
	it.each([
		["a single PEM body line of a key", `answer: ${SEC1_LINE}`, SEC1_LINE],
		["a 44-character TSIG secret", `tsig ${TSIG} refused`, TSIG],
		["password=…", "GET /v3/info?user=admin&password=s3cr3t-Pa55 failed", "s3cr3t-Pa55"],
		["a JSON token", '{"token": "tok_live_4f9a8b7c", "ok": false}', "tok_live_4f9a8b7c"],
		["Basic credentials", "Authorization: Basic YWRtaW46aHVudGVyMg==", "YWRtaW46aHVudGVyMg=="],
		["a Bearer token", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "eyJhbGciOiJIUzI1NiJ9"],
	])("removes %s", (_kind, text, secret) => {
		expect(scrubSecrets(text)).not.toContain(secret);
	});

	it("keeps paths, hex serials and fingerprints, and HAProxy's words", () => {
		const text =
			"/var/lib/certificatee/state/certificates/example/current serial 04a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3 fingerprint 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08: Can't update!";
		expect(scrubSecrets(text)).toBe(text);
	});

	it("removes every secret the configuration loaded by value, whatever its shape: password files, interpolated variables, TSIG, the encryption key", () => {
		writeFileSync(join(dir, "dpapi"), "short-pw\n", { mode: 0o600 });
		writeFileSync(join(dir, "tsig.key"), `key "k" {\n\talgorithm hmac-sha256;\n\tsecret "${TSIG}";\n};\n`, {
			mode: 0o600,
		});
		const encryption = Buffer.alloc(32, 7).toString("hex");
		writeFileSync(join(dir, "enc"), `${encryption}\n`, { mode: 0o600 });
		interpolate(
			{ targets: [{ password_file: join(dir, "dpapi") }, { token: `\${API_TOKEN}` }] },
			{ API_TOKEN: "plain words here" },
			[],
		);
		readTsigSecret(join(dir, "tsig.key"));
		loadEncryptionKey(join(dir, "enc"), {});
		const base64Key = Buffer.alloc(32, 7).toString("base64");
		const message = `endpoint said short-pw and plain words here; key ${encryption} / ${base64Key}; tsig ${TSIG}`;
		const error = new CertificateeError("ENDPOINT_ERROR", message);
		for (const secret of ["short-pw", "plain words here", encryption, base64Key, TSIG]) {
			expect(error.message).not.toContain(secret);
		}
		expect(error.message).toContain("endpoint said [secret removed]");

		const lines: string[] = [];
		const destination = new Writable({
			write(chunk, _enc, done) {
				lines.push(String(chunk));
				done();
			},
		});
		createLogger({ destination }).warn(`hook stderr: short-pw and ${SEC1_LINE}`);
		expect(lines.join("")).not.toContain("short-pw");
		expect(lines.join("")).not.toContain(SEC1_LINE);
	});
});
