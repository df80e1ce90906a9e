/**
 * An IP address certificate (RFC 8738) end to end: issued by a real Pebble over real HTTP-01 (Pebble's VA
 * fetches http://127.0.0.1:<port>/.well-known/acme-challenge/…), pushed by the runtime target into a real
 * HAProxy where it is the default certificate of a bind of its own (docs/layouts.md, "IP address
 * certificates"), and probed without SNI, as a client of the IP sends none. The same certificate on a bind whose
 * default is another one is reported as IP_NOT_DEFAULT_CERTIFICATE.
 */
import { X509Certificate } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../../src/certificates/index.js";
import { probeServed } from "../../../src/probe/index.js";
import { endpointFailures } from "../../../src/reconcile/failures.js";
import type { DesiredCertificate } from "../../../src/reconcile/model.js";
import { type AcmeIssuer, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import type { IssuedPem } from "../../../src/sources/types.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";
import { freePort } from "../../harness/haproxy.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { rig, syncOnce } from "../../harness/targets.js";
import { expectValidIssue, pebbleConfig } from "../../sources/acme/helpers.js";

const r = rig({ reloadSafe: true });
let pebble: PebbleHandle;
let issuer: AcmeIssuer;
let stateDir: string;
let issued: IssuedPem;

beforeAll(async () => {
	pebble = await startPebble({ validation: "real" });
	stateDir = await mkdtemp(path.join(tmpdir(), "certificatee-ip-"));
	issuer = createAcmeIssuer(pebbleConfig(pebble), { store: stateAt(stateDir) });
	issued = await issuer.issue(
		{ certificate: "edge-ip", domains: ["127.0.0.1"], keyType: "ecdsa-p256" },
		AbortSignal.timeout(30_000),
	);
}, 60_000);

afterAll(async () => {
	await issuer?.close();
	await pebble?.stop();
	await rm(stateDir, { recursive: true, force: true });
});

function desired(): DesiredCertificate {
	const bundle = parseBundle(
		{ cert: issued.certPem, chain: issued.chainPem, key: issued.keyPem },
		{ source: "pebble" },
	);
	return { name: "edge-ip", names: ["127.0.0.1"], bundle, origin: "issuer pebble: edge-ip" };
}

/** HAProxy with the main TLS bind (default: default.invalid) and `bind <ipPort> ssl crt certs/edge-ip.pem`. */
async function haproxyWithIpBind() {
	// The file must exist when HAProxy starts: a placeholder for the same IP, from another CA.
	const placeholder = await issueTestLeaf(await createTestCa("placeholder CA"), { names: ["127.0.0.1"] });
	const ipPort = await freePort();
	const h = await r.haproxy({
		crtDir: { "edge-ip.pem": placeholder.combinedPem },
		extraConfig: [
			"frontend fe_ip",
			`    bind 127.0.0.1:${ipPort} ssl crt {dir}/certs/edge-ip.pem`,
			'    http-request return status 200 content-type text/plain string "ip\\n"',
		].join("\n"),
	});
	return { h, ip: `127.0.0.1:${ipPort}`, placeholder };
}

describe("IP address certificates", () => {
	it("Pebble issues 127.0.0.1 over real HTTP-01; the IP bind serves it as its default, probed without SNI", async () => {
		expectValidIssue(issued, await pebble.root(), []);
		expect(new X509Certificate(issued.certPem).subjectAltName).toBe("IP Address:127.0.0.1");
		const { h, ip, placeholder } = await haproxyWithIpBind();
		expect((await probeServed({ address: ip, sni: "127.0.0.1" })).serial).toBe(
			parseBundle({ combined: placeholder.combinedPem }, { source: "x" }).leaf.serial,
		);

		const t = r.runtime(h, { probe: ip });
		const e = await syncOnce(t, [desired()], { expectOk: true });
		const want = desired().bundle.leaf.serial;
		expect(e.served).toEqual([
			expect.objectContaining({ sni: "127.0.0.1", match: true, servedSerial: want }),
		]);
		expect(endpointFailures(e)).toEqual([]);
		const served = await probeServed({ address: ip, sni: "127.0.0.1" });
		expect(served.serial).toBe(want);
		expect(served.names).toEqual(["127.0.0.1"]);
	}, 60_000);

	it("on a bind whose default is another certificate, it is IP_NOT_DEFAULT_CERTIFICATE with the layout's fix", async () => {
		const { h } = await haproxyWithIpBind();
		// Probing the main bind: a client of 127.0.0.1 there gets default.invalid.
		const t = r.runtime(h, { probe: h.address });
		const e = await syncOnce(t, [desired()]);
		const failures = endpointFailures(e).filter((f) => f.code === "IP_NOT_DEFAULT_CERTIFICATE");
		expect(failures).toHaveLength(1);
		expect(failures[0]?.message).toContain("127.0.0.1 (no SNI) serves serial");
		expect(failures[0]?.message).toContain("certificate edge-ip is not the bind's default certificate");
		expect(failures[0]?.hint).toContain("docs/layouts.md");
		expect(e.ok).toBe(true);
	}, 60_000);
});
