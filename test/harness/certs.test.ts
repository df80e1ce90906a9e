import { X509Certificate } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf } from "./certs.js";

describe("harness/certs", () => {
	it("issues a leaf that verifies against its CA and carries the names asked for", async () => {
		const ca = await createTestCa();
		const leaf = await issueTestLeaf(ca, { names: ["a.test", "www.a.test"] });
		const cert = new X509Certificate(leaf.certPem);
		expect(cert.verify(new X509Certificate(ca.certPem).publicKey)).toBe(true);
		expect(cert.subjectAltName).toBe("DNS:a.test, DNS:www.a.test");
		expect(cert.serialNumber).toBe(leaf.serial.padStart(cert.serialNumber.length, "0"));
	});
});
