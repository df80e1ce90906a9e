/**
 * The order's CSR (csr.ts) against the openssl CLI: its signature verifies, and it asks for what acme-client
 * 5.4's createCsr asked for (same subject, key usage, names, signature algorithm) for every key type.
 */
import { execFileSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import acme from "acme-client";
import { describe, expect, it } from "vitest";
import { createCsr } from "../../../src/sources/acme/csr.js";

/** openssl's reading of a CSR (signature bytes left out), after it checked the self-signature. */
function opensslText(pem: string): string {
	const out = execFileSync("openssl", ["req", "-noout", "-verify", "-text", "-reqopt", "no_sigdump"], {
		input: pem,
		encoding: "utf8",
		stdio: ["pipe", "pipe", "pipe"],
	});
	return out;
}

function signatureAlgorithm(pem: string): string | undefined {
	const text = execFileSync("openssl", ["req", "-noout", "-text"], { input: pem, encoding: "utf8" });
	return /Signature Algorithm: (\S+)/.exec(text)?.[1];
}

const keys = {
	"ecdsa-p256": () => generateKeyPairSync("ec", { namedCurve: "P-256" }),
	"ecdsa-p384": () => generateKeyPairSync("ec", { namedCurve: "P-384" }),
	"rsa-2048": () => generateKeyPairSync("rsa", { modulusLength: 2048 }),
};

describe("createCsr", () => {
	for (const [type, generate] of Object.entries(keys)) {
		it(`${type}: verifies, and asks for what acme-client's createCsr asked for`, async () => {
			const { privateKey, publicKey } = generate();
			const names = ["shop.test", "www.shop.test", "192.0.2.7", "2001:db8::1"];
			const ours = createCsr(names, "shop.test", privateKey, publicKey);
			const [, theirs] = await acme.crypto.createCsr(
				{ altNames: [...names], commonName: "shop.test" },
				privateKey.export({ type: "pkcs8", format: "pem" }),
			);
			const text = opensslText(ours);
			expect(text).toBe(opensslText(theirs.toString()));
			expect(text).toContain("Subject: CN = shop.test");
			expect(text).toContain(
				"DNS:shop.test, DNS:www.shop.test, IP Address:192.0.2.7, IP Address:2001:DB8:0:0:0:0:0:1",
			);
			expect(text).toContain("Digital Signature, Key Encipherment");
			expect(signatureAlgorithm(ours)).toBe(signatureAlgorithm(theirs.toString()));
		});
	}

	it("without a CN (a long first name or an IP): an empty subject, and the names only as SANs", () => {
		const { privateKey, publicKey } = keys["ecdsa-p256"]();
		const text = opensslText(createCsr(["192.0.2.7", "a.test"], undefined, privateKey, publicKey));
		expect(text).not.toContain("CN =");
		expect(text).toContain("IP Address:192.0.2.7, DNS:a.test");
	});

	it("encodes IPv6 forms openssl reads back the same: compressed, full, and with an embedded IPv4", () => {
		const { privateKey, publicKey } = keys["ecdsa-p256"]();
		const names = ["::1", "fe80::", "2001:db8:0:0:1:0:0:2", "::ffff:192.0.2.9", "1:2:3:4:5:6:7:8"];
		const text = opensslText(createCsr(names, undefined, privateKey, publicKey));
		expect(text).toContain(
			[
				"IP Address:0:0:0:0:0:0:0:1",
				"IP Address:FE80:0:0:0:0:0:0:0",
				"IP Address:2001:DB8:0:0:1:0:0:2",
				"IP Address:0:0:0:0:0:FFFF:C000:209",
				"IP Address:1:2:3:4:5:6:7:8",
			].join(", "),
		);
	});
});
