/**
 * End to end: Pebble resolves through a real BIND 9, and certificatee answers DNS-01 by RFC 2136 updates to
 * it. A wildcard and its apex in one order share one TXT name; both values must be there at once.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AcmeIssuer, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { type BindHandle, startBind } from "../../harness/bind.js";
import { failure } from "../../harness/failure.js";
import { expectNoKeyMaterial } from "../../harness/no-secrets.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { expectValidIssue, pebbleConfig } from "./helpers.js";

let bind: BindHandle;
let pebble: PebbleHandle;
let root: string;
let dir: string;
const issuers: AcmeIssuer[] = [];

beforeAll(async () => {
	bind = await startBind({ zone: "example.test" });
	// No authorization reuse: every order is validated through BIND.
	pebble = await startPebble({
		validation: "real",
		dnsServer: bind.address,
		env: { PEBBLE_AUTHZREUSE: "0" },
	});
	root = await pebble.root();
	dir = await mkdtemp(path.join(tmpdir(), "certificatee-rfc2136-issue-"));
});

afterAll(async () => {
	await Promise.all(issuers.map((i) => i.close()));
	await pebble?.stop();
	await bind?.stop();
	if (dir) await rm(dir, { recursive: true, force: true });
});

function rfc2136Issuer(secretFile = bind.secretFile("certificatee")): AcmeIssuer {
	const config = pebbleConfig(pebble, {
		http01: undefined,
		dns01: {
			rfc2136: {
				server: bind.address,
				zone: "example.test",
				tsig_key_name: "certificatee",
				tsig_algorithm: "hmac-sha256",
				tsig_secret_file: secretFile,
			},
		},
	});
	const issuer = createAcmeIssuer(config, { store: stateAt(dir) });
	issuers.push(issuer);
	return issuer;
}

describe("ACME DNS-01 through RFC 2136 to BIND 9", () => {
	it("issues *.example.test and example.test in one order; the TXT values are gone afterwards", async () => {
		const issued = await rfc2136Issuer().issue(
			{ certificate: "wild", domains: ["example.test", "*.example.test"], keyType: "ecdsa-p256" },
			AbortSignal.timeout(60_000),
		);
		const leaf = expectValidIssue(issued, root, ["example.test", "www.example.test"]);
		expect(leaf.subjectAltName).toContain("DNS:*.example.test");
		expect(await bind.txt("_acme-challenge.example.test")).toEqual([]);
		// named's own account: two values added (apex and wildcard), both deleted, each update signed.
		const updates = bind
			.log()
			.split("\n")
			.filter((l) => /\bat '?_acme-challenge\.example\.test'? TXT/.test(l));
		expect(updates.filter((l) => l.includes("adding an RR"))).toHaveLength(2);
		expect(updates.filter((l) => l.includes("deleting an RR"))).toHaveLength(2);
		expect(updates.every((l) => l.includes("/key certificatee:"))).toBe(true);
	});

	it("removes what it published when another name of the order fails", async () => {
		const error = await failure(
			rfc2136Issuer().issue(
				{ certificate: "partial", domains: ["ok.example.test", "elsewhere.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(60_000),
			),
		);
		expect(error.code).toBe("DNS_UPDATE_FAILED");
		expect(error.message).toContain("the name is not inside zone example.test");
		expect(error.context.certificate).toBe("partial");
		expect(await bind.txt("_acme-challenge.ok.example.test")).toEqual([]);
	});

	it("a wrong TSIG secret fails the order with DNS_UPDATE_FAILED (BADSIG) and shows no secret", async () => {
		const wrong = path.join(dir, "wrong.secret");
		await writeFile(wrong, `${Buffer.alloc(32, 9).toString("base64")}\n`, { mode: 0o600 });
		const error = await failure(
			rfc2136Issuer(wrong).issue(
				{ certificate: "bad", domains: ["bad.example.test", "*.bad.example.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(60_000),
			),
		);
		expect(error.code).toBe("DNS_UPDATE_FAILED");
		expect(error.message).toBe(
			`RFC 2136 add of TXT _acme-challenge.bad.example.test in zone example.test at ${bind.address}: the server rejected the TSIG signature (NOTAUTH, BADSIG)`,
		);
		expect(error.hint).toContain(`the secret in ${wrong}`);
		expect(error.context.certificate).toBe("bad");
		const shown = `${error.message}\n${error.hint}\n${JSON.stringify(error)}`;
		for (const file of [wrong, bind.secretFile("certificatee")]) {
			expect(shown).not.toContain((await readFile(file, "utf8")).trim());
		}
		expectNoKeyMaterial(shown);
	});
});
