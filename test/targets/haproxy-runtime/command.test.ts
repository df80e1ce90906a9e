import { describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import {
	type Answer,
	addCrtListCommand,
	checkName,
	frameRequest,
	lockBackoffMs,
	operationOf,
	readAnswer,
} from "../../../src/targets/haproxy-runtime/command.js";
import { expect as answers } from "../../../src/targets/haproxy-runtime/parse.js";

// Verbatim answers from ../shared/research/haproxy-runtime.md (§2.5, §3.4-3.9; 2.6.12 unless marked).
describe("targets/haproxy-runtime/command: what an answer means", () => {
	const set = (t: string) => answers.set("certs/a.pem", t);
	const commit = (t: string) => answers.commit("certs/c.pem", t);
	const any = () => undefined;
	it.each<[string, string, (t: string) => string | undefined, Answer]>([
		[
			"set ok",
			"Transaction created for certificate certs/a.pem!\n\n",
			set,
			{ kind: "ok", text: "Transaction created for certificate certs/a.pem!\n\n" },
		],
		[
			"certificates locked while a commit rebuilds instances",
			"Can't show!\nOperations on certificates are currently locked!\n\n",
			any,
			{ kind: "locked" },
		],
		["operator-level socket", "Permission denied\n\n", set, { kind: "denied" }],
		[
			"set of a certificate not in the store",
			"Can't replace a certificate which is not referenced by the configuration!\nCan't update certs/zzz.pem!\n\n",
			set,
			{
				kind: "failed",
				problem:
					"Can't replace a certificate which is not referenced by the configuration! / Can't update certs/zzz.pem!",
			},
		],
		[
			"set answered for another certificate (2.6.12)",
			"Transaction updated for certificate certs/b.pem!\n\n",
			set,
			{ kind: "failed", problem: "transaction belongs to 'certs/b.pem', not 'certs/a.pem'" },
		],
		[
			"commit without a key",
			"The transaction must contain at least a certificate and a private key!\nCan't commit certs/c.pem!\n\n",
			commit,
			{
				kind: "failed",
				problem:
					"The transaction must contain at least a certificate and a private key! / Can't commit certs/c.pem!",
			},
		],
		[
			"abort with no transaction",
			"No ongoing transaction!\n\n",
			(t) => answers.abort("certs/a.pem", t),
			{ kind: "failed", problem: "No ongoing transaction!" },
		],
		[
			"new store that exists",
			"Certificate 'pem/new.pem' already exists!\n\n",
			(t) => answers.new("pem/new.pem", t),
			{ kind: "failed", problem: "Certificate 'pem/new.pem' already exists!" },
		],
		[
			"add to a crt-list while the store is empty",
			"Can't edit the crt-list: certificate 'pem/new.pem' is empty!\n\n",
			(t) => answers.addCrtList("pem/new.pem", t),
			{ kind: "failed", problem: "Can't edit the crt-list: certificate 'pem/new.pem' is empty!" },
		],
	])("%s", (_case, text, check, want) => {
		expect(readAnswer(text, check)).toEqual(want);
	});
});

describe("targets/haproxy-runtime/command: requests", () => {
	const framing = { master: false, bufsize: 16_384, endpoint: "lb1" };
	const codeOf = (f: () => unknown): string => {
		try {
			f();
			return "no error";
		} catch (e) {
			return isCertificateeError(e) ? e.code : String(e);
		}
	};

	it("frames a command, a payload ended by an empty line, and the master CLI's @1 prefix", () => {
		expect(frameRequest("show ssl cert", undefined, framing)).toBe("show ssl cert\n");
		expect(frameRequest("set ssl cert certs/a.pem", "PEM\n", framing)).toBe(
			"set ssl cert certs/a.pem <<\nPEM\n\n",
		);
		expect(frameRequest("show info", undefined, { ...framing, master: true })).toBe("@1 show info\n");
	});

	it("refuses a payload with an empty line, and a request of tune.bufsize bytes or more", () => {
		expect(codeOf(() => frameRequest("set ssl cert a.pem", "A\n\nB\n", framing))).toBe(
			"RUNTIME_COMMAND_FAILED",
		);
		const command = "set ssl cert a.pem";
		const fits = "x".repeat(1024 - `${command} <<\n\n\n`.length - 1);
		expect(codeOf(() => frameRequest(command, `${fits}\n`, { ...framing, bufsize: 1024 }))).toBe("no error");
		expect(codeOf(() => frameRequest(command, `${fits}x\n`, { ...framing, bufsize: 1024 }))).toBe(
			"RUNTIME_PAYLOAD_TOO_LARGE",
		);
	});

	it("adds to a crt-list on the command line, or as a one-line payload with options and filters", () => {
		expect(addCrtListCommand("crtlist.txt", "pem/new.pem", {}, "lb1")).toEqual({
			command: "add ssl crt-list crtlist.txt pem/new.pem",
		});
		expect(
			addCrtListCommand(
				"crtlist.txt",
				"pem/new.pem",
				{ sslOptions: "alpn h2 ssl-min-ver TLSv1.2", filters: ["new.test", "alias.test"] },
				"lb1",
			),
		).toEqual({
			command: "add ssl crt-list crtlist.txt",
			payload: "pem/new.pem [alpn h2 ssl-min-ver TLSv1.2] new.test alias.test\n",
		});
	});

	it("refuses names HAProxy would not read as one token", () => {
		expect(checkName("certs/a.pem", "lb1")).toBe("certs/a.pem");
		// A backslash: HAProxy's CLI unescapes it, so `evil\x.pem` would name `evilx.pem` (issue 25, finding 7).
		for (const bad of ["a b.pem", "a;b", "#a", "a\0b", "", "certs/evil\\x.pem", "a\\"]) {
			expect(
				codeOf(() => checkName(bad, "lb1")),
				bad,
			).toBe("RUNTIME_COMMAND_FAILED");
		}
	});

	it("names the operation by its first three words, and backs off from 10 ms up to 500 ms while locked", () => {
		expect(operationOf("show ssl crt-list -n certs")).toBe("show ssl crt-list");
		expect(lockBackoffMs(1, 0.5)).toBe(10);
		expect(lockBackoffMs(3, 0)).toBe(20);
		expect(lockBackoffMs(9, 0.5)).toBe(500);
	});
});
