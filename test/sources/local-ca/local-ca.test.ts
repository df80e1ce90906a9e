import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadBundle } from "../../../src/certificates/index.js";
import { createLocalCaIssuer, localCaSourceSchema } from "../../../src/sources/local-ca/index.js";
import { stateAt } from "../../harness/state.js";

const run = promisify(execFile);
const signal = new AbortController().signal;

let dir: string;
beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-localca-"));
});
afterEach(async () => {
	await rm(dir, { recursive: true, force: true });
});

async function opensslVerify(rootPem: string, certPem: string, chainPem: string): Promise<string> {
	await writeFile(join(dir, "root.pem"), rootPem);
	await writeFile(join(dir, "leaf.pem"), certPem);
	const args = ["verify", "-CAfile", join(dir, "root.pem"), "-purpose", "sslserver"];
	if (chainPem) {
		await writeFile(join(dir, "chain.pem"), chainPem);
		args.push("-untrusted", join(dir, "chain.pem"));
	}
	const { stdout } = await run("openssl", [...args, join(dir, "leaf.pem")]);
	return stdout.trim();
}

describe("sources/local-ca", () => {
	it("creates a CA on first use (key 0600) and issues leaves that openssl verifies", async () => {
		const config = localCaSourceSchema.parse({ name: "local", type: "local-ca" });
		expect(config.lifetime).toBe(7 * 86_400_000);
		const stateDir = join(dir, "state");
		const issuer = createLocalCaIssuer(config, { store: stateAt(stateDir) });
		const issued = await issuer.issue(
			{ certificate: "web", domains: ["web.test", "www.web.test", "127.0.0.1"], keyType: "ecdsa-p256" },
			signal,
		);
		const root = await issuer.exportRoot();
		expect(await opensslVerify(root, issued.certPem, issued.chainPem)).toBe(`${join(dir, "leaf.pem")}: OK`);
		// The CA (its key with it) is the store's authorities/local record, 0600.
		expect((await stat(join(stateDir, "authorities", "local.json"))).mode & 0o777).toBe(0o600);
		const leaf = new X509Certificate(issued.certPem);
		expect(leaf.subjectAltName).toBe("DNS:web.test, DNS:www.web.test, IP Address:127.0.0.1");
		const lifetime = Date.parse(leaf.validTo) - Date.parse(leaf.validFrom);
		expect(lifetime).toBe(7 * 86_400_000 + 60_000);
		const ca = new X509Certificate(root);
		expect(ca.ca).toBe(true);
		expect(ca.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
		const loaded = loadBundle(
			{ cert: issued.certPem, chain: issued.chainPem, key: issued.keyPem },
			{ source: "local-ca test", now: new Date(), requiredNames: ["web.test", "www.web.test"] },
		);
		expect(loaded.ok).toBe(true);
	});

	it("reuses its CA across instances and renews with a new serial; short lifetimes work", async () => {
		const config = localCaSourceSchema.parse({ name: "demo", type: "local-ca", lifetime: "90s" });
		const first = createLocalCaIssuer(config, { store: stateAt(dir) });
		const a = await first.issue({ certificate: "x", domains: ["x.test"], keyType: "ecdsa-p384" }, signal);
		const second = createLocalCaIssuer(config, { store: stateAt(dir) });
		const b = await second.issue({ certificate: "x", domains: ["x.test"], keyType: "rsa-2048" }, signal);
		expect(await first.exportRoot()).toBe(await second.exportRoot());
		const [ca, ca2] = [a, b].map((i) => new X509Certificate(i.certPem));
		expect(ca!.serialNumber).not.toBe(ca2!.serialNumber);
		expect(Date.parse(ca!.validTo) - Date.parse(ca!.validFrom)).toBe(99_000);
		expect(ca2!.publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
		for (const i of [a, b]) {
			expect(await opensslVerify(await second.exportRoot(), i.certPem, i.chainPem)).toMatch(/: OK$/);
		}
	});

	it("two instances creating the CA at once end up with one CA", async () => {
		const config = localCaSourceSchema.parse({ name: "race", type: "local-ca" });
		const roots = await Promise.all(
			[1, 2, 3].map(() => createLocalCaIssuer(config, { store: stateAt(dir) }).exportRoot()),
		);
		expect(new Set(roots).size).toBe(1);
		expect(await stateAt(dir).list("authorities/")).toEqual(["authorities/race"]);
	});

	it("fails with ISSUE_FAILED when its state directory cannot be written, and recovers later", async () => {
		const blocker = join(dir, "not-a-dir");
		await writeFile(blocker, "a file where a directory should be");
		const issuer = createLocalCaIssuer(localCaSourceSchema.parse({ name: "l", type: "local-ca" }), {
			store: stateAt(join(blocker, "state")),
		});
		await expect(
			issuer.issue({ certificate: "x", domains: ["x.test"], keyType: "ecdsa-p256" }, signal),
		).rejects.toMatchObject({ code: "ISSUE_FAILED", retryable: true });
		await rm(blocker);
		const issued = await issuer.issue(
			{ certificate: "x", domains: ["x.test"], keyType: "ecdsa-p256" },
			signal,
		);
		expect(await opensslVerify(await issuer.exportRoot(), issued.certPem, issued.chainPem)).toMatch(/: OK$/);
	});
});
