import { X509Certificate } from "node:crypto";
import { type AddressInfo, createServer, type Server } from "node:net";
import { createServer as tlsServer } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../src/errors.js";
import { handshakeRefused, probeServed } from "../../src/probe/index.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";

describe("probe: what a TLS handshake by SNI shows", () => {
	let ca: TestIssuer;
	let leaf: TestLeaf;
	let h: Haproxy;
	let silent: Server;

	beforeAll(async () => {
		ca = await createTestCa("probe root");
		leaf = await issueTestLeaf(ca, { names: ["p.test", "127.0.0.1"], serial: "00AB01" });
		h = await startHaproxy({ crtDir: { "p.pem": leaf.combinedPem } });
		silent = createServer(() => undefined).listen(0, "127.0.0.1");
	});
	afterAll(async () => {
		silent?.close();
		await h?.stop();
	});

	it("reports the served leaf: normalised serial, SHA-256, names, expiry", async () => {
		const x = new X509Certificate(leaf.certPem);
		const served = await probeServed({ address: h.address, sni: "p.test" });
		expect(served).toEqual({
			sni: "p.test",
			serial: "AB01",
			fingerprint: x.fingerprint256.replaceAll(":", ""),
			names: ["127.0.0.1", "p.test"],
			notAfter: new Date(x.validTo),
			keyType: "ec",
			chain: [],
			presented: [expect.stringMatching(/^-----BEGIN CERTIFICATE-----\n/)],
		});
		// The leaf as sent, in PEM: what a rollout's trust check verifies.
		expect(new X509Certificate(served.presented[0] as string).fingerprint256).toBe(x.fingerprint256);
		expect((await probeServed({ address: h.address, sni: "other.test" })).names).toEqual(["default.invalid"]);
	});

	it("probes an IP address without SNI, as its clients connect: what the bind serves by default", async () => {
		// ALPNCallback sees each ClientHello's server name (the probe always offers http/1.1).
		const seen: Array<string | undefined> = [];
		const server = tlsServer({
			cert: leaf.certPem,
			key: leaf.keyPem,
			ALPNCallback: ({ servername }: { servername?: string }) => {
				seen.push(servername || undefined);
				return "http/1.1";
			},
		});
		await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
		try {
			const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
			expect((await probeServed({ address, sni: "127.0.0.1" })).sni).toBe("127.0.0.1");
			await probeServed({ address, sni: "p.test" });
			expect(seen).toEqual([undefined, "p.test"]);
		} finally {
			server.close();
		}
		// HAProxy: a client of the IP (no SNI) gets the default certificate, not the one carrying the IP SAN.
		expect((await probeServed({ address: h.address, sni: "127.0.0.1" })).names).toEqual(["default.invalid"]);
		const refused = await probeServed({ address: "127.0.0.1:1", sni: "192.0.2.1", timeoutMs: 2000 }).catch(
			(e: unknown) => e,
		);
		expect(String((refused as Error).message)).toContain("for 192.0.2.1 (no SNI)");
	});

	it("says whether the chain verifies when a CA is given", async () => {
		expect((await probeServed({ address: h.address, sni: "p.test", ca: ca.certPem })).verified).toBe(true);
		const stranger = await createTestCa("stranger");
		expect((await probeServed({ address: h.address, sni: "p.test", ca: stranger.certPem })).verified).toBe(
			false,
		);
	});

	it("fails with PROBE_FAILED on a silent port, a closed port and a bad address", async () => {
		const address = silent.address();
		const port = typeof address === "object" && address ? address.port : 0;
		const timeout = await probeServed({ address: `127.0.0.1:${port}`, sni: "p.test", timeoutMs: 200 }).catch(
			(e: unknown) => e,
		);
		expect(isCertificateeError(timeout, "PROBE_FAILED")).toBe(true);
		const refused = await probeServed({ address: "127.0.0.1:1", sni: "p.test" }).catch((e: unknown) => e);
		expect(isCertificateeError(refused, "PROBE_FAILED")).toBe(true);
		await expect(probeServed({ address: "no-port", sni: "p.test" })).rejects.toThrow(/host:port/);
	});

	it("a name HAProxy holds no certificate for (an RSA client, ECDSA certificates only) is a refused handshake, said on one line", async () => {
		const refused = await probeServed({ address: h.address, sni: "p.test", keyType: "rsa" }).catch(
			(e: unknown) => e,
		);
		expect(isCertificateeError(refused, "PROBE_FAILED")).toBe(true);
		expect(handshakeRefused(refused)).toBe(true);
		const message = (refused as Error).message;
		expect(message).toBe(
			`TLS probe of ${h.address} for p.test: the server refused the handshake (TLS alert: handshake failure): it holds no certificate for p.test for a client of key type rsa`,
		);
		expect((refused as { hint?: string }).hint).toMatch(/deploy a certificate for p\.test \(key type rsa\)/);
		// A port nobody listens on is no refusal by HAProxy: a write would not fix it.
		const closed = await probeServed({ address: "127.0.0.1:1", sni: "p.test" }).catch((e: unknown) => e);
		expect(handshakeRefused(closed)).toBe(false);
		expect((closed as Error).message).not.toMatch(/\n/);
	});
});
