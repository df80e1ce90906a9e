import { describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import {
	DEFAULT_BUFSIZE,
	dataplaneSetCertSize,
	payloadTooLarge,
} from "../../../src/targets/haproxy/bufsize.js";

describe("targets/haproxy/bufsize", () => {
	it("sizes the set ssl cert request as client-native frames it (master-worker form, the longer one)", () => {
		const pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
		const framed = `set severity-output number;@1 set ssl cert /etc/haproxy/ssl/a.pem <<\n${pem}\n;quit\n`;
		expect(dataplaneSetCertSize("/etc/haproxy/ssl/a.pem", pem)).toBe(Buffer.byteLength(framed));
		// client-native adds the payload's missing final newline (terminateHeredocPayload).
		expect(dataplaneSetCertSize("/etc/haproxy/ssl/a.pem", pem.trimEnd())).toBe(Buffer.byteLength(framed));
		// Bytes, not characters.
		expect(dataplaneSetCertSize("é.pem", pem) - dataplaneSetCertSize("e.pem", pem)).toBe(1);
	});

	it("refuses a request of bufsize bytes or more, naming its size and never key material", () => {
		const check = {
			bufsize: DEFAULT_BUFSIZE,
			endpoint: "fra1",
			operation: "runtime-set",
			certificate: "/c/a.pem",
		};
		expect(payloadTooLarge({ ...check, size: 16_383 })).toBeUndefined();
		const refused = payloadTooLarge({ ...check, size: 16_384 });
		expect(isCertificateeError(refused, "RUNTIME_PAYLOAD_TOO_LARGE")).toBe(true);
		expect(refused?.message).toMatch(/request of 16384 bytes refused for fra1/);
		expect(refused?.context).toMatchObject({
			endpoint: "fra1",
			operation: "runtime-set",
			certificate: "/c/a.pem",
		});
		expect(payloadTooLarge({ ...check, size: 20_000, bufsize: 32_768 })).toBeUndefined();
	});
});
