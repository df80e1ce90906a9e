import { describe, expect, it } from "vitest";
import {
	expect as answers,
	normalisePem,
	parseAcmeStatus,
	parseCertDetail,
	parseCertList,
	parseCrtList,
	parseHaproxyDate,
	refusalCode,
} from "../../../src/targets/haproxy-runtime/parse.js";

// Verbatim answers from ../shared/research/haproxy-runtime.md (2.6.12 and 3.2.0).
describe("targets/haproxy-runtime/parse", () => {
	it("reads the store listing with an open transaction", () => {
		expect(
			parseCertList("# transaction\n*certs/a.pem\n# filename\ncerts/000-default.pem\ncerts/a.pem\n\n"),
		).toEqual({
			transaction: "certs/a.pem",
			names: ["certs/000-default.pem", "certs/a.pem"],
		});
	});

	it("reads a 3.2 detail with chain and candidate OCSP/SCTL lines", () => {
		const text =
			"Filename: certs/a.pem\nCrt filename: certs/a.pem\nKey filename: certs/a.pem\nOCSP filename: certs/a.pem.ocsp\n" +
			"SCTL filename: certs/a.pem.sctl\nStatus: Uncommitted\nSerial: 0ABC\nnotBefore: Nov 30 08:59:04 2026 GMT\n" +
			"notAfter: Feb  8 08:59:04 2027 GMT\nSubject Alternative Name: DNS:a.test, , DNS:WWW.a.test\nAlgorithm: RSA2048\n" +
			"SHA1 FingerPrint: 8087BC54EB33887B064F97A4383B994F119DAC40\nSubject: /CN=a.test\nIssuer: /CN=Test Intermediate CA\n" +
			"Chain Subject: /CN=Test Intermediate CA\nChain Issuer: /CN=Test Root CA\nOCSP Response Key: \n\n";
		expect(parseCertDetail(text)).toEqual({
			filename: "certs/a.pem",
			// 3.2+: the files it was loaded from, as the configuration spells them (placement.ts).
			crtFilename: "certs/a.pem",
			keyFilename: "certs/a.pem",
			status: "Uncommitted",
			serial: "0ABC",
			notBefore: new Date("2026-11-30T08:59:04Z"),
			notAfter: new Date("2027-02-08T08:59:04Z"),
			sans: ["a.test", "www.a.test"],
			algorithm: "RSA2048",
			sha1: "8087BC54EB33887B064F97A4383B994F119DAC40",
			subject: "/CN=a.test",
			issuer: "/CN=Test Intermediate CA",
			chain: [{ subject: "/CN=Test Intermediate CA", issuer: "/CN=Test Root CA" }],
		});
		expect(parseCertDetail("Filename: pem/new.pem\nStatus: Empty\nOCSP Response Key: \n\n")).toMatchObject({
			status: "Empty",
			sans: [],
		});
		expect(parseHaproxyDate("nonsense")).toBeUndefined();
	});

	it("reads a crt-list with the NUL byte after ALPN and line numbers", () => {
		const text =
			"# crtlist.txt\ncrtlist/l1.pem:1\ncrtlist/l2.pem:2 [alpn h2,http/1.1\x00] l2.test\ncrtlist/l3.pem:3 l3.test *.l3.test\npem/new.pem:4\n\n";
		expect(parseCrtList(text)).toEqual([
			{ file: "crtlist/l1.pem", line: 1, filters: [] },
			{ file: "crtlist/l2.pem", line: 2, options: "alpn h2,http/1.1", filters: ["l2.test"] },
			{ file: "crtlist/l3.pem", line: 3, filters: ["l3.test", "*.l3.test"] },
			{ file: "pem/new.pem", line: 4, filters: [] },
		]);
	});

	it.each([
		["set ok", answers.set("certs/a.pem", "Transaction created for certificate certs/a.pem!\n\n"), undefined],
		[
			"set answered for another certificate (2.6.12)",
			answers.set("certs/a.pem", "Transaction updated for certificate certs/b.pem!\n\n"),
			"transaction belongs to 'certs/b.pem', not 'certs/a.pem'",
		],
		[
			"commit, 13 instances",
			answers.commit("certs/b.pem", "Committing certs/b.pem.............\nSuccess!\n\n"),
			undefined,
		],
		["commit, unused", answers.commit("pem/new.pem", "Committing pem/new.pem\nSuccess!\n\n"), undefined],
		[
			"commit, key mismatch",
			answers.commit(
				"certs/c.pem",
				"inconsistencies between private key and certificate loaded 'certs/c.pem'.\nCan't commit certs/c.pem!\n\n",
			),
			"inconsistencies between private key and certificate loaded 'certs/c.pem'. / Can't commit certs/c.pem!",
		],
		[
			"commit, rebuild failed",
			answers.commit("certs/a.pem", "Committing certs/a.pem.\nFailed!\n\n"),
			"Committing certs/a.pem. / Failed!",
		],
		[
			"del in use, extra blank line (2.6.12)",
			answers.del(
				"certs/a.pem",
				"Can't remove the certificate: certificate 'certs/a.pem' in use, can't be deleted!\n\n\n",
			),
			"Can't remove the certificate: certificate 'certs/a.pem' in use, can't be deleted!",
		],
		[
			"add crt-list ok",
			answers.addCrtList(
				"pem/new.pem",
				"Inserting certificate 'pem/new.pem' in crt-list 'crtlist.txt'.\nSuccess!\n\n",
			),
			undefined,
		],
		[
			"del crt-list ok",
			answers.delCrtList("certs/c.pem", "Entry 'certs/c.pem' deleted in crtlist 'certs'!\n\n"),
			undefined,
		],
	])("%s", (_case, got, want) => {
		expect(got).toBe(want);
	});

	it("normalises a PEM: LF, no blank lines, PEM blocks only", () => {
		const pem =
			"junk\r\n-----BEGIN CERTIFICATE-----\r\nAAAA\r\n\r\nBBBB\r\n-----END CERTIFICATE-----\r\n\r\n\n-----BEGIN PRIVATE KEY-----\nCCCC\n-----END PRIVATE KEY-----\ntrailer";
		expect(normalisePem(pem)).toBe(
			"-----BEGIN CERTIFICATE-----\nAAAA\nBBBB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nCCCC\n-----END PRIVATE KEY-----\n",
		);
		expect(normalisePem("no pem here")).toBe("");
	});
});

describe("targets/haproxy-runtime/parse refusalCode", () => {
	it.each([
		[
			"del ssl cert",
			"Can't remove the certificate: certificate 'certs/a.pem' in use, can't be deleted!\n\n\n",
			"RUNTIME_CERT_IN_USE",
		],
		[
			"del ssl cert",
			"Can't remove the certificate: certificate 'pem/new.pem' doesn't exist!\n\n\n",
			"RUNTIME_COMMAND_FAILED",
		],
		["del ssl cert", "Permission denied\n\n", "RUNTIME_COMMAND_FAILED"],
		// Only `del ssl cert` refuses a certificate for being in use.
		["set ssl cert", "certificate 'certs/a.pem' in use\n\n", "RUNTIME_COMMAND_FAILED"],
	])("%s answered %j: %s", (operation, text, code) => {
		expect(refusalCode(operation, text)).toBe(code);
	});
});

describe("HAProxy 3.x layouts, verbatim answers of 3.4.0", () => {
	it("HAProxy 3.4.0: a crt-store load prints its files relative to the store's crt-base/key-base", () => {
		const text =
			"Filename: @web/site-a\nCrt filename: a.crt\nKey filename: a.key\nOption: ocsp-update off\nOption: jwt off\n" +
			"Status: Used\nSerial: 72C7B9E6196194765FEE4BBD0FBDA12C2647B8EE\nSubject Alternative Name: DNS:a.lay.test\n\n";
		const d = parseCertDetail(text);
		expect([d.filename, d.crtFilename, d.keyFilename, d.status]).toEqual([
			"@web/site-a",
			"a.crt",
			"a.key",
			"Used",
		]);
	});

	it("HAProxy 3.4.0 and 3.2.0: `acme status` names each managed certificate and its acme section; 2.6 knows no such command", () => {
		const text =
			"# certificate\tsection\tstate\texpiration date (UTC)\texpires in\tscheduled date (UTC)\tscheduled in\n" +
			"@acm/d.pem\tLE\tScheduled\t2027-01-02T11:47:56Z\t29d 23h59m59s\t2026-12-30T23:47:56Z\t27d 11h59m59s\n\n";
		expect(parseAcmeStatus(text)).toEqual(new Map([["@acm/d.pem", "LE"]]));
		const unknown =
			"Unknown command, but maybe one of the following ones is a better match:\n" +
			"  get acl <acl> <value>                   : report the patterns matching a sample for an ACL\n\n";
		expect(parseAcmeStatus(unknown)).toBeUndefined();
	});
});
