/**
 * DNS-01 through a hook script that sets/clears TXT records in pebble-challtestsrv, whose DNS Pebble really
 * queries; the hook's log shows the order of calls and the concurrency limit.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import { type AcmeIssuer, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { expectValidIssue, pebbleConfig } from "./helpers.js";

// argv: <management url> <log file> <action> <name> <value>; "fail" in the name makes it exit 3.
const HOOK = `
import { appendFileSync } from "node:fs";
const [mgmt, log, action, name, value] = process.argv.slice(2);
if (name.includes("fail")) { process.stderr.write("provider says no\\n"); process.exit(3); }
const endpoint = action === "set" ? "/set-txt" : "/clear-txt";
const body = action === "set" ? { host: name + ".", value } : { host: name + "." };
const res = await fetch(mgmt + endpoint, { method: "POST", body: JSON.stringify(body) });
if (!res.ok) process.exit(2);
appendFileSync(log, action + " " + name + " " + value.length + "\\n");
`;

let pebble: PebbleHandle;
let root: string;
let dir: string;
let hook: string[];
let logFile: string;
const issuers: AcmeIssuer[] = [];

function dnsIssuer(extra: Record<string, unknown> = {}): AcmeIssuer {
	const created = createAcmeIssuer(pebbleConfig(pebble, { http01: undefined, dns_hook: hook, ...extra }), {
		store: stateAt(dir),
	});
	issuers.push(created);
	return created;
}

beforeAll(async () => {
	// No authorization reuse: every order must be validated through the hook.
	pebble = await startPebble({ validation: "real", env: { PEBBLE_AUTHZREUSE: "0" } });
	root = await pebble.root();
	dir = await mkdtemp(path.join(tmpdir(), "certificatee-dns01-"));
	const script = path.join(dir, "hook.mjs");
	await writeFile(script, HOOK);
	logFile = path.join(dir, "hook.log");
	hook = [process.execPath, script, pebble.challtestsrv!.managementUrl, logFile];
});

afterAll(async () => {
	await Promise.all(issuers.map((i) => i.close()));
	await pebble?.stop();
	await rm(dir, { recursive: true, force: true });
});

const log = async () => (await readFile(logFile, "utf8").catch(() => "")).trim().split("\n").filter(Boolean);

describe("ACME issuer over real DNS-01 with a hook", () => {
	it("issues a wildcard and its base name: both TXT values set before validation, cleared after", async () => {
		await writeFile(logFile, "");
		const issued = await dnsIssuer().issue(
			{ certificate: "wild", domains: ["wild.test", "*.wild.test"], keyType: "ecdsa-p256" },
			AbortSignal.timeout(30_000),
		);
		const leaf = expectValidIssue(issued, root, ["wild.test", "a.wild.test"]);
		expect(leaf.subjectAltName).toContain("DNS:*.wild.test");
		// 43 characters: base64url of a SHA-256 digest, not the key authorization itself.
		expect(await log()).toEqual([
			"set _acme-challenge.wild.test 43",
			"set _acme-challenge.wild.test 43",
			"clear _acme-challenge.wild.test 43",
			"clear _acme-challenge.wild.test 43",
		]);
	});

	it("keeps to the concurrency limit: with 1, one order's records are cleared before the next is set", async () => {
		await writeFile(logFile, "");
		const acme = dnsIssuer({ concurrency: 1 });
		const issued = await Promise.all(
			["one", "two", "three"].map((n) =>
				acme.issue(
					{ certificate: n, domains: [`${n}.dns.test`], keyType: "ecdsa-p256" },
					AbortSignal.timeout(30_000),
				),
			),
		);
		for (const [k, n] of ["one", "two", "three"].entries())
			expectValidIssue(issued[k]!, root, [`${n}.dns.test`]);
		const lines = await log();
		expect(lines).toHaveLength(6);
		for (let k = 0; k < 6; k += 2) {
			expect(lines[k]!.startsWith("set ")).toBe(true);
			expect(lines[k + 1]).toBe(lines[k]!.replace(/^set/, "clear"));
		}
	});

	it("fails with HOOK_FAILED naming the record, exit status and the hook's stderr", async () => {
		const error = await dnsIssuer()
			.issue({ certificate: "f", domains: ["fail.test"], keyType: "ecdsa-p256" }, AbortSignal.timeout(30_000))
			.catch((e: unknown) => e);
		expect(isCertificateeError(error, "HOOK_FAILED")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.message).toBe(
			"dns_hook set _acme-challenge.fail.test exited with status 3: provider says no",
		);
		expect(error.context.certificate).toBe("f");
	});

	it("reports a TXT record the CA cannot see with the ACME problem (hook that sets nothing)", async () => {
		const error = await dnsIssuer({ dns_hook: ["/bin/true"] })
			.issue(
				{ certificate: "nothing", domains: ["nothing.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(30_000),
			)
			.catch((e: unknown) => e);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.context.problem).toBe("urn:ietf:params:acme:error:unauthorized");
		expect(error.context.operation).toBe("dns-01 validation of nothing.test");
		expect(error.message).toContain("No TXT records found");
		expect(error.hint).toContain("dns_hook");
	});

	const slowHook = ["/bin/sh", "-c", "exec sleep 5", "hook"];

	it("kills a hook that overruns dns_hook_timeout and says so", async () => {
		const t0 = performance.now();
		const error = await dnsIssuer({ dns_hook: slowHook, dns_hook_timeout: "300ms" })
			.issue(
				{ certificate: "slow", domains: ["slow.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(30_000),
			)
			.catch((e: unknown) => e);
		console.log(`hook timeout reported after ${((performance.now() - t0) / 1000).toFixed(2)} s`);
		expect(isCertificateeError(error, "HOOK_FAILED")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.message).toBe("dns_hook set _acme-challenge.slow.test timed out after 300 ms");
	});

	it("stops when the caller's signal aborts: the running hook is killed, ISSUE_FAILED 'was cancelled'", async () => {
		const pidFile = path.join(dir, "hook.pid");
		await rm(pidFile, { force: true });
		// The hook records its pid, then becomes `sleep 5` (exec keeps the pid).
		const hook = ["/bin/sh", "-c", `echo $$ > ${pidFile}; exec sleep 5`, "hook"];
		const controller = new AbortController();
		const pending = dnsIssuer({ dns_hook: hook })
			.issue({ certificate: "cancel", domains: ["cancel.test"], keyType: "ecdsa-p256" }, controller.signal)
			.catch((e: unknown) => e);
		let pid = 0;
		while (!pid) {
			pid = Number((await readFile(pidFile, "utf8").catch(() => "")).trim());
			if (!pid) await new Promise((r) => setTimeout(r, 20));
		}
		controller.abort();
		const error = await pending;
		expect(isCertificateeError(error, "ISSUE_FAILED")).toBe(true);
		if (!isCertificateeError(error)) return;
		expect(error.message).toBe("ACME authorization for cancel was cancelled");
		expect(error.retryable).toBe(true);
		// The hook is gone (killed, then reaped), long before its 5 s sleep would end.
		const alive = () => {
			try {
				process.kill(pid, 0);
				return true;
			} catch {
				return false;
			}
		};
		const deadline = Date.now() + 3000;
		while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
		expect(alive()).toBe(false);
	});
});
