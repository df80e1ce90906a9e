/** Shared checks for ACME issuer tests: issued chains against Pebble's root, keys against leaves. */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { expect } from "vitest";
import { type AcmeSourceConfig, acmeSourceSchema } from "../../../src/sources/acme/index.js";
import type { IssuedPem } from "../../../src/sources/types.js";
import type { PebbleHandle } from "../../harness/pebble.js";

/** A config for `pebble`, answering HTTP-01 where Pebble's VA connects, polling fast. */
export function pebbleConfig(pebble: PebbleHandle, extra: Record<string, unknown> = {}): AcmeSourceConfig {
	return acmeSourceSchema.parse({
		name: "pebble",
		type: "acme",
		directory_url: pebble.directoryUrl,
		email: "ops@example.com",
		ca_file: pebble.caFile,
		http01: { listen: `127.0.0.1:${pebble.httpPort}` },
		poll_interval: "250ms",
		timeout: "30s",
		...extra,
	});
}

/** The leaf and intermediates chain to `rootPem`, cover `names`, and match the issued key. */
export function expectValidIssue(issued: IssuedPem, rootPem: string, names: string[]): X509Certificate {
	const leaf = new X509Certificate(issued.certPem);
	const chain = issued.chainPem
		.split(/(?=-----BEGIN CERTIFICATE-----)/)
		.filter((p) => p.includes("BEGIN"))
		.map((p) => new X509Certificate(p));
	const root = new X509Certificate(rootPem);
	expect(chain.length).toBeGreaterThanOrEqual(1);
	let child = leaf;
	for (const parent of [...chain, root]) {
		expect(child.checkIssued(parent)).toBe(true);
		expect(child.verify(parent.publicKey)).toBe(true);
		child = parent;
	}
	for (const name of names) expect(leaf.checkHost(name), name).toBeDefined();
	expect(leaf.checkPrivateKey(createPrivateKey(issued.keyPem))).toBe(true);
	expect(issued.certPem.match(/BEGIN CERTIFICATE/g)).toHaveLength(1);
	return leaf;
}
