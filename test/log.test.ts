import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { Secret } from "../src/certificates/types.js";
import { CertificateeError, scrubSecrets } from "../src/errors.js";
import { createLogger } from "../src/log.js";

function capture() {
	const lines: string[] = [];
	const destination = new Writable({
		write(chunk, _enc, done) {
			lines.push(String(chunk));
			done();
		},
	});
	return { lines, log: createLogger({ level: "debug", destination }) };
}

const KEY =
	"-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1234567890abcdefghij\n-----END PRIVATE KEY-----\n";

describe("log", () => {
	it("redacts passwords, keys and authorization headers wherever they are configured once", () => {
		const { lines, log } = capture();
		log.info(
			{
				password: "hunter2",
				endpoint: { name: "fra1", password: "hunter3", headers: { authorization: "Basic aGk6aGk=" } },
				target: { endpoints: { password: "hunter4" } },
				keyPem: KEY,
				pem: KEY,
				hmac_key: "eab-secret",
			},
			"configured",
		);
		const out = lines.join("");
		for (const secret of ["hunter2", "hunter3", "hunter4", "aGk6aGk=", "BEGIN PRIVATE KEY", "eab-secret"]) {
			expect(out).not.toContain(secret);
		}
		expect(out).toContain("[redacted]");
		expect(out).toContain("fra1");
	});

	it("a Secret logs as [redacted], and endpoint texts are scrubbed of PEM and base64", () => {
		const { lines, log } = capture();
		log.info({ anything: new Secret(KEY) }, "bundle");
		expect(lines.join("")).not.toContain("BEGIN PRIVATE KEY");
		const echoed = `set ssl cert /etc/haproxy/x.pem <<\n${KEY}\nCan't update!`;
		expect(scrubSecrets(echoed)).not.toContain("MIGHAgEA");
		const err = new CertificateeError("ENDPOINT_ERROR", `runtime answered: ${echoed}`);
		expect(err.message).not.toContain("BEGIN PRIVATE KEY");
		expect(err.message).toContain("Can't update!");
	});
});
