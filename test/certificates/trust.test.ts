/**
 * Chain trust: a bundle's chain checked link by link against a trust store, as sync does before a push. Real
 * certificates from the harness's CA (a root, intermediates, leaves); each case is a chain a CA or an operator
 * really gets wrong.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../src/certificates/index.js";
import {
	certificatesOf,
	createTrustCache,
	loadTrustStore,
	type TrustStore,
	verifyBundle,
	verifyChain,
} from "../../src/certificates/trust.js";
import { CertificateeError } from "../../src/errors.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../harness/certs.js";

let root: TestIssuer;
let intermediate: TestIssuer;
let otherRoot: TestIssuer;
let otherIntermediate: TestIssuer;
let store: TrustStore;
const dir = mkdtempSync(join(tmpdir(), "certificatee-trust-"));

beforeAll(async () => {
	root = await createTestCa("trust root");
	intermediate = await createTestCa("trust intermediate", { issuer: root });
	otherRoot = await createTestCa("other root");
	otherIntermediate = await createTestCa("trust intermediate", { issuer: otherRoot });
	writeFileSync(join(dir, "roots.pem"), root.certPem);
	store = loadTrustStore(join(dir, "roots.pem"), "targets.lb.trust_store");
});

/** A bundle whose leaf `signer` issued, carrying `chain` (PEM of the intermediates as sent). */
async function bundle(signer: TestIssuer, chain: string) {
	const leaf = await issueTestLeaf(root, { names: ["trust.test"], intermediates: [signer] });
	return parseBundle({ cert: leaf.certPem, chain, key: leaf.keyPem }, { source: "test" });
}

describe("certificates/trust", () => {
	it("a leaf and its intermediate reach the root of the store", async () => {
		const v = verifyBundle(await bundle(intermediate, intermediate.certPem), store, new Date(), "c");
		expect(v).toEqual({ ok: true, anchor: "CN=trust root" });
	});

	it("a chain that carries the root itself is trusted too", async () => {
		const b = await bundle(intermediate, intermediate.certPem + root.certPem);
		expect(verifyBundle(b, store, new Date(), "c").ok).toBe(true);
	});

	it("a missing intermediate: CHAIN_UNTRUSTED naming the issuer to add", async () => {
		const v = verifyBundle(await bundle(intermediate, ""), store, new Date(), "certificate web");
		expect(v.ok).toBe(false);
		if (v.ok) return;
		expect(v.code).toBe("CHAIN_UNTRUSTED");
		expect(v.message).toContain(
			"certificate web: the chain ends at CN=trust.test, issued by CN=trust intermediate",
		);
		expect(v.hint).toContain("add the intermediate that issued it (CN=trust intermediate)");
	});

	it("a wrong intermediate of the same name (another CA's): CHAIN_BROKEN, the signature does not check", async () => {
		// A bundle refuses such a chain when it is parsed; a served chain (a rollout's canary) is checked as it came.
		const leaf = await issueTestLeaf(root, { names: ["trust.test"], intermediates: [intermediate] });
		const served = certificatesOf(leaf.certPem + otherIntermediate.certPem);
		const v = verifyChain(served, store, new Date(), "c");
		expect(v.ok).toBe(false);
		if (v.ok) return;
		expect(v.code).toBe("CHAIN_BROKEN");
		expect(v.message).toContain("is not signed by the next certificate of the chain, CN=trust intermediate");
	});

	it("a good chain to a CA the store does not hold: CHAIN_UNTRUSTED", async () => {
		const v = verifyBundle(
			await bundle(otherIntermediate, otherIntermediate.certPem),
			store,
			new Date(),
			"c",
		);
		expect(v.ok).toBe(false);
		if (v.ok) return;
		expect(v.code).toBe("CHAIN_UNTRUSTED");
		expect(v.message).toContain(
			`issued by CN=other root, which trust store ${join(dir, "roots.pem")} does not hold`,
		);
	});

	it("an intermediate not valid at the time checked: CHAIN_EXPIRED", async () => {
		const b = await bundle(intermediate, intermediate.certPem);
		const v = verifyBundle(b, store, new Date(Date.now() + 20 * 365 * 86_400_000), "c");
		expect(v.ok).toBe(false);
		if (!v.ok) expect(v.code).toBe("CHAIN_EXPIRED");
	});

	it("an intermediate in the store ends the walk (a store of intermediates one trusts)", async () => {
		writeFileSync(join(dir, "intermediate.pem"), intermediate.certPem);
		const only = loadTrustStore(join(dir, "intermediate.pem"), "f");
		expect(verifyBundle(await bundle(intermediate, ""), only, new Date(), "c").ok).toBe(true);
	});

	it("a store that cannot be used is CONFIG_INVALID naming the field and the file", () => {
		writeFileSync(join(dir, "empty.pem"), "not a certificate\n");
		for (const file of [join(dir, "absent.pem"), join(dir, "empty.pem")]) {
			let error: unknown;
			try {
				loadTrustStore(file, "targets.lb.trust_store");
			} catch (e) {
				error = e;
			}
			expect(error).toBeInstanceOf(CertificateeError);
			expect((error as CertificateeError).code).toBe("CONFIG_INVALID");
			expect((error as CertificateeError).message).toContain(`targets.lb.trust_store: trust store ${file}`);
		}
	});

	it('"system" is the OS bundle, and a public chain does not reach a test root through it', async () => {
		const system = loadTrustStore("system", "f");
		expect(system.source).toMatch(/^system \(/);
		expect(system.anchors.length).toBeGreaterThan(10);
		expect(certificatesOf(root.certPem)).toHaveLength(1);
		const v = verifyBundle(await bundle(intermediate, intermediate.certPem), system, new Date(), "c");
		expect(v.ok).toBe(false);
	});

	it("the cache reuses a chain's verdict for an hour, then checks it again (validity dates included)", async () => {
		const verify = createTrustCache();
		const b = await bundle(intermediate, intermediate.certPem);
		const now = new Date();
		const first = verify(b, store, now, "c");
		expect(first.ok).toBe(true);
		expect(verify(b, store, new Date(now.getTime() + 59 * 60_000), "c")).toBe(first);
		const started = performance.now();
		for (let i = 0; i < 5000; i++) verify(b, store, now, "c");
		expect(performance.now() - started).toBeLessThan(1000);
		// Past the hour (here: past the intermediate's end) it is checked again.
		const later = verify(b, store, new Date(now.getTime() + 20 * 365 * 86_400_000), "c");
		expect(later).not.toBe(first);
		expect(later.ok).toBe(false);
		// Another chain or another store is its own entry.
		expect(verify(await bundle(intermediate, ""), store, now, "c").ok).toBe(false);
	});
});
