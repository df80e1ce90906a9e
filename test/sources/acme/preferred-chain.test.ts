/**
 * preferred_chain against a real Pebble serving one alternate chain (PEBBLE_ALTERNATE_ROOTS=1): naming the
 * alternate root's common name picks the chain that ends under it; without it the default chain comes back.
 */
import { X509Certificate } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AcmeIssuer, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { pebbleConfig } from "./helpers.js";

let pebble: PebbleHandle;
let stateDir: string;
const issuers: AcmeIssuer[] = [];
let roots: X509Certificate[];

const cn = (dn: string) => /CN=([^\n,]+)/.exec(dn)?.[1] ?? "";

beforeAll(async () => {
	pebble = await startPebble({ validation: "always-valid", env: { PEBBLE_ALTERNATE_ROOTS: "1" } });
	stateDir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-chain-"));
	const agent = new Agent({ connect: { ca: pebble.caPem } });
	roots = [];
	for (const i of [0, 1]) {
		const res = await request(`${pebble.managementUrl}/roots/${i}`, { dispatcher: agent });
		roots.push(new X509Certificate(await res.body.text()));
	}
	await agent.close();
});

afterAll(async () => {
	await Promise.all(issuers.map((i) => i.close()));
	await pebble?.stop();
	await rm(stateDir, { recursive: true, force: true });
});

async function chainTop(extra: Record<string, unknown>, name: string): Promise<X509Certificate> {
	const issuer = createAcmeIssuer(pebbleConfig(pebble, extra), { store: stateAt(stateDir) });
	issuers.push(issuer);
	const issued = await issuer.issue(
		{ certificate: name, domains: [`${name}.test`], keyType: "ecdsa-p256" },
		AbortSignal.timeout(30_000),
	);
	const chain = issued.chainPem.split(/(?=-----BEGIN CERTIFICATE-----)/).filter((p) => p.includes("BEGIN"));
	expect(chain.length).toBeGreaterThan(0);
	return new X509Certificate(chain.at(-1)!);
}

describe("preferred_chain", () => {
	it("picks the alternate chain whose root's common name matches, and the default chain otherwise", async () => {
		const [defaultRoot, alternateRoot] = roots as [X509Certificate, X509Certificate];
		expect(cn(defaultRoot.subject)).not.toBe(cn(alternateRoot.subject));

		const plain = await chainTop({}, "plain");
		expect(plain.verify(defaultRoot.publicKey)).toBe(true);

		const chosen = await chainTop({ preferred_chain: cn(alternateRoot.subject) }, "alt");
		expect(cn(chosen.issuer)).toBe(cn(alternateRoot.subject));
		expect(chosen.verify(alternateRoot.publicKey)).toBe(true);

		const same = await chainTop({ preferred_chain: cn(defaultRoot.subject) }, "same");
		expect(same.verify(defaultRoot.publicKey)).toBe(true);
	}, 60_000);
});
