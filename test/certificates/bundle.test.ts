import { beforeAll, describe, expect, it } from "vitest";
import { checkBundle, loadBundle, parseBundle } from "../../src/certificates/index.js";
import { CertificateeError, type ErrorCode } from "../../src/errors.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";

const DAY = 86_400_000;
const now = new Date();

interface Corpus {
	root: TestIssuer;
	inter: TestIssuer;
	leaf: TestLeaf; // a.test, www.a.test via intermediate
	other: TestLeaf; // b.test, another key
	rsa: TestLeaf;
	wildcard: TestLeaf;
	expired: TestLeaf;
	future: TestLeaf;
	expiredInter: TestLeaf;
	expiredInterCa: TestIssuer;
}
let c: Corpus;

beforeAll(async () => {
	const root = await createTestCa("corpus root");
	const inter = await createTestCa("corpus intermediate", { issuer: root });
	const expiredInterCa = await createTestCa("corpus old intermediate", { issuer: root });
	c = {
		root,
		inter,
		expiredInterCa,
		leaf: await issueTestLeaf(root, { names: ["a.test", "www.a.test"], intermediates: [inter] }),
		other: await issueTestLeaf(root, { names: ["b.test"] }),
		rsa: await issueTestLeaf(root, { names: ["rsa.test", "127.0.0.1"], keyType: "rsa-2048" }),
		wildcard: await issueTestLeaf(root, { names: ["*.example.test"] }),
		expired: await issueTestLeaf(root, {
			names: ["old.test"],
			notBefore: new Date(now.getTime() - 10 * DAY),
			notAfter: new Date(now.getTime() - DAY),
		}),
		future: await issueTestLeaf(root, {
			names: ["soon.test"],
			notBefore: new Date(now.getTime() + DAY),
			notAfter: new Date(now.getTime() + 10 * DAY),
		}),
		expiredInter: await issueTestLeaf(root, { names: ["c.test"], intermediates: [expiredInterCa] }),
	};
});

function keyBody(pem: string): string {
	return pem.split("\n").slice(1, -2).join("").slice(0, 40);
}

function expectError(
	fn: () => unknown,
	code: ErrorCode,
	source: string,
	secrets: string[],
): CertificateeError {
	let thrown: unknown;
	try {
		fn();
	} catch (e) {
		thrown = e;
	}
	expect(thrown).toBeInstanceOf(CertificateeError);
	const err = thrown as CertificateeError;
	expect(err.code).toBe(code);
	expect(err.message).toContain(source);
	expect(err.message).not.toMatch(/-----BEGIN/);
	for (const s of secrets) expect(JSON.stringify(err.toJSON())).not.toContain(s);
	return err;
}

describe("certificates/bundle: good bundles", () => {
	it("parses a combined bundle and describes its leaf", () => {
		const b = parseBundle({ combined: c.leaf.combinedPem }, { source: "a.pem" });
		expect(b.leaf.dnsNames).toEqual(["a.test", "www.a.test"]);
		expect(b.leaf.serial).toMatch(/^([0-9A-F]{2})+$/);
		expect(b.leaf.fingerprint).toMatch(/^[0-9A-F]{64}$/);
		expect(b.leaf.sha1).toMatch(/^[0-9A-F]{40}$/);
		expect(b.leaf.keyType).toBe("ec");
		expect(b.leaf.keySize).toBe(256);
		expect(b.leaf.subject).toBe("CN=a.test");
		expect(b.leaf.issuer).toBe("CN=corpus intermediate");
		expect(b.chain.map((x) => x.subject)).toEqual(["CN=corpus intermediate"]);
		expect(checkBundle(b, { source: "a.pem", now, requiredNames: ["a.test", "WWW.A.TEST"] })).toEqual([]);
	});

	it("parses split files into the same normal form as the combined file", () => {
		const split = parseBundle(
			{ cert: c.leaf.certPem, chain: c.leaf.chainPem, key: c.leaf.keyPem },
			{ source: "a.crt" },
		);
		const combined = parseBundle({ combined: c.leaf.combinedPem }, { source: "a.pem" });
		expect(split.fullchainPem).toBe(combined.fullchainPem);
		expect(split.key.reveal()).toBe(combined.key.reveal());
	});

	it("normalises CRLF, blank lines and any order into leaf, intermediates, key", () => {
		const messy = `\r\n${c.leaf.keyPem}\r\n\r\n${c.leaf.chainPem}\r\n\r\n${c.leaf.certPem}`.replace(
			/\n/g,
			"\r\n",
		);
		const b = parseBundle({ combined: messy }, { source: "messy.pem" });
		const text = b.fullchainPem + b.key.reveal();
		expect(text).not.toMatch(/\r|\n\n/);
		expect(text.indexOf(c.leaf.certPem.split("\n")[1] as string)).toBe(28);
		expect(text.endsWith("-----END PRIVATE KEY-----\n")).toBe(true);
		expect(b.chain).toHaveLength(1);
	});

	it("describes RSA keys and IP SANs", () => {
		const b = parseBundle({ combined: c.rsa.combinedPem }, { source: "rsa.pem" });
		expect(b.leaf.keyType).toBe("rsa");
		expect(b.leaf.keySize).toBe(2048);
		expect(b.leaf.ipAddresses).toEqual(["127.0.0.1"]);
		expect(checkBundle(b, { source: "rsa.pem", now, requiredNames: ["127.0.0.1", "rsa.test"] })).toEqual([]);
	});

	it("covers names under a wildcard per RFC 6125", () => {
		const b = parseBundle({ combined: c.wildcard.combinedPem }, { source: "w.pem" });
		expect(checkBundle(b, { source: "w.pem", now, requiredNames: ["a.example.test"] })).toEqual([]);
		for (const name of ["a.b.example.test", "example.test"]) {
			const problems = checkBundle(b, { source: "w.pem", now, requiredNames: [name] });
			expect(problems.map((p) => p.code)).toEqual(["BUNDLE_NAMES_NOT_COVERED"]);
			expect(problems[0]?.message).toContain(name);
		}
	});

	it("never shows key material when printed", () => {
		const b = parseBundle({ combined: c.leaf.combinedPem }, { source: "a.pem" });
		const printed = JSON.stringify(b) + String(b.key) + require("node:util").inspect(b);
		expect(printed).not.toContain("PRIVATE KEY");
		expect(printed).not.toContain(keyBody(c.leaf.keyPem));
	});
});

describe("certificates/bundle: bad bundles are refused with a code, the source and no key material", () => {
	const rows: Array<[string, (c: Corpus) => Parameters<typeof parseBundle>[0], ErrorCode]> = [
		["empty input", () => ({ combined: "" }), "BUNDLE_EMPTY"],
		["whitespace only", () => ({ combined: " \n\n\t" }), "BUNDLE_EMPTY"],
		[
			"binary input (DER)",
			() => ({ combined: Buffer.from([0x30, 0x82, 0x01, 0x00, 0x00, 0x05]) }),
			"BUNDLE_NOT_PEM",
		],
		["text without PEM", () => ({ combined: "hello world\n" }), "BUNDLE_NOT_PEM"],
		["oversized input", () => ({ combined: "A".repeat(1024 * 1024 + 1) }), "BUNDLE_TOO_LARGE"],
		["truncated: no END line", (k) => ({ combined: k.leaf.combinedPem.slice(0, -30) }), "BUNDLE_TRUNCATED"],
		[
			"corrupt base64 inside a block",
			(k) => ({ combined: k.leaf.certPem.replace(/\n([A-Za-z0-9+/]{10})/, "\n!!$1") + k.leaf.keyPem }),
			"BUNDLE_TRUNCATED",
		],
		["no key", (k) => ({ combined: k.leaf.certPem + k.leaf.chainPem }), "BUNDLE_NO_KEY"],
		["no certificate", (k) => ({ combined: k.leaf.keyPem }), "BUNDLE_NO_CERTIFICATE"],
		[
			"two keys",
			(k) => ({ combined: k.leaf.certPem + k.leaf.keyPem + k.other.keyPem }),
			"BUNDLE_SEVERAL_KEYS",
		],
		[
			"key of another certificate",
			(k) => ({ combined: k.leaf.certPem + k.other.keyPem }),
			"BUNDLE_KEY_MISMATCH",
		],
		[
			"split: key of another certificate",
			(k) => ({ cert: k.leaf.certPem, key: k.other.keyPem }),
			"BUNDLE_KEY_MISMATCH",
		],
		[
			"two leaves",
			(k) => ({ combined: k.leaf.certPem + k.other.certPem + k.leaf.keyPem }),
			"BUNDLE_SEVERAL_LEAVES",
		],
		[
			"chain does not link (wrong intermediate)",
			(k) => ({ combined: k.other.certPem + k.inter.certPem + k.other.keyPem }),
			"BUNDLE_CHAIN_BROKEN",
		],
		[
			"encrypted PKCS#8 key",
			(k) => ({
				combined: `${k.leaf.certPem}-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n`,
			}),
			"BUNDLE_ENCRYPTED_KEY",
		],
		[
			"legacy encrypted key",
			(k) => ({
				combined: `${k.leaf.certPem}-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n`,
			}),
			"BUNDLE_ENCRYPTED_KEY",
		],
		[
			"key that does not parse",
			(k) => ({
				combined: `${k.leaf.certPem}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n`,
			}),
			"BUNDLE_BAD_KEY",
		],
		[
			"certificate that does not parse",
			(k) => ({ combined: `-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n${k.leaf.keyPem}` }),
			"BUNDLE_BAD_CERTIFICATE",
		],
		[
			"unexpected block type",
			(k) => ({ combined: `${k.leaf.combinedPem}-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n` }),
			"BUNDLE_NOT_PEM",
		],
	];
	it.each(rows)("%s", (_name, make, code) => {
		const secrets = [keyBody(c.leaf.keyPem), keyBody(c.other.keyPem)];
		expectError(
			() => parseBundle(make(c), { source: "/etc/certs/bad.pem" }),
			code,
			"/etc/certs/bad.pem",
			secrets,
		);
	});

	const checks: Array<[string, (k: Corpus) => string, ErrorCode, string[]?]> = [
		["expired certificate", (k) => k.expired.combinedPem, "BUNDLE_EXPIRED"],
		["not yet valid certificate", (k) => k.future.combinedPem, "BUNDLE_NOT_YET_VALID"],
		["names not covered", (k) => k.other.combinedPem, "BUNDLE_NAMES_NOT_COVERED", ["b.test", "c.test"]],
	];
	it.each(checks)("%s", (_name, make, code, required) => {
		const result = loadBundle(
			{ combined: make(c) },
			{ source: "/etc/certs/bad.pem", now, requiredNames: required ?? [] },
		);
		expect(result.ok).toBe(false);
		if (result.ok) return;
		expect(result.problems.map((p) => p.code)).toEqual([code]);
		expect(result.problems[0]?.message).toContain("/etc/certs/bad.pem");
	});

	it("an expired intermediate is refused too, naming it", () => {
		const b = parseBundle({ combined: c.expiredInter.combinedPem }, { source: "c.pem" });
		const later = new Date(now.getTime() + 20 * 365 * DAY);
		const problems = checkBundle(b, { source: "c.pem", now: later });
		expect(problems.map((p) => p.code)).toEqual(["BUNDLE_EXPIRED", "BUNDLE_EXPIRED"]);
		expect(problems[1]?.message).toContain("corpus old intermediate");
	});

	it("lists every problem at once", () => {
		const result = loadBundle(
			{ combined: c.expired.combinedPem },
			{ source: "x.pem", now, requiredNames: ["nope.test"] },
		);
		expect(result.ok ? [] : result.problems.map((p) => p.code)).toEqual([
			"BUNDLE_EXPIRED",
			"BUNDLE_NAMES_NOT_COVERED",
		]);
	});
});
