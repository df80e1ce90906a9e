/**
 * An issuer fallback list (`issuers: [first, second]`) against two real Pebbles, through `sync` as a child
 * process: the first refuses the name (rejectedIdentifier, permanent), so the second is tried at once in the
 * same cycle and issues; an unreachable first issuer (transient) hands over after `fallback_after` failures.
 * The certificate records which issuer issued it, and its chain leads to that Pebble's root.
 */
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { type PebbleHandle, startPebble } from "../harness/pebble.js";
import { freePorts } from "../harness/ports.js";

let dir: string;
let refusing: PebbleHandle;
let accepting: PebbleHandle;
let configFile: string;

const acme = (name: string, pebble: PebbleHandle, directoryUrl = pebble.directoryUrl) => ({
	name,
	type: "acme",
	directory_url: directoryUrl,
	ca_file: pebble.caFile,
	http01: { listen: `127.0.0.1:${pebble.httpPort}` },
	poll_interval: "250ms",
	http_retries: 0,
});

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-fallback-"));
	refusing = await startPebble({ validation: "always-valid", domainBlocklist: ["web.test"] });
	accepting = await startPebble({ validation: "always-valid" });
	const [closed] = (await freePorts(1)) as [number];
	configFile = join(dir, "certificatee.yaml");
	const config = {
		state_dir: join(dir, "state"),
		sources: [
			acme("first", refusing),
			acme("second", accepting),
			acme("down", accepting, `https://127.0.0.1:${closed}/dir`),
		],
		certificates: [
			{ name: "web", domains: ["web.test"], issuers: ["first", "second"] },
			{ name: "api", domains: ["api.test"], issuers: ["down", "second"], fallback_after: 1 },
		],
		targets: [{ name: "files", type: "directory", path: join(dir, "out"), layout: "haproxy-pem" }],
	};
	writeFileSync(configFile, JSON.stringify(config, null, 2));
}, 60_000);

afterAll(async () => {
	await refusing?.stop();
	await accepting?.stop();
	rmSync(dir, { recursive: true, force: true });
});

const history = (name: string) =>
	JSON.parse(readFileSync(join(dir, "state", "certificates", `${name}.json`), "utf8")).value.history as {
		issuer: string;
		chainPem: string;
	}[];

describe("issuer fallback", () => {
	it("a refusing (permanent) and an unreachable (transient) first issuer hand over to the second in one sync", async () => {
		const r = await certificatee(["sync", "--config", configFile]);
		expect(r.code, r.stdout + r.stderr).toBe(0);
		const root = new X509Certificate(await accepting.root());
		for (const name of ["web", "api"]) {
			const [latest] = history(name);
			expect(latest?.issuer).toBe("second");
			const chain = (latest?.chainPem ?? "")
				.split(/(?=-----BEGIN CERTIFICATE-----)/)
				.filter((p) => p.includes("BEGIN"));
			expect(new X509Certificate(chain.at(-1)!).verify(root.publicKey)).toBe(true);
			readFileSync(join(dir, "out", `${name}.pem`));
		}
		const logs = r.stderr.split("\n").filter((l) => l.includes("falling back to the next issuer"));
		expect(logs).toHaveLength(2);
		expect(logs.join("\n")).toMatch(/ACME_ERROR/);
		// The status names the issuer that issued each certificate.
		const status = await certificatee(["--json", "status", "--config", configFile]);
		const summary = JSON.parse(status.stdout).summary as {
			certificates: { name: string; issuer?: string }[];
		};
		expect(summary.certificates.find((c) => c.name === "web")?.issuer).toBe("second");
	}, 90_000);

	it("without a fallback, a permanent refusal is shown as needing a human, backing off 1 h", async () => {
		const solo = join(dir, "solo.yaml");
		writeFileSync(
			solo,
			JSON.stringify({
				state_dir: join(dir, "solo-state"),
				sources: [acme("first", refusing)],
				certificates: [{ name: "web", domains: ["web.test"], issuer: "first" }],
				targets: [{ name: "files", type: "directory", path: join(dir, "solo-out"), layout: "haproxy-pem" }],
			}),
		);
		const r = await certificatee(["sync", "--config", solo]);
		expect(r.code).toBe(1);
		expect(r.stdout).toMatch(/rejectedIdentifier/);
		const status = await certificatee(["status", "--config", solo]);
		expect(status.stdout).toMatch(/web: needs a human; backing off until \S+/);
		const json = await certificatee(["--json", "status", "--config", solo]);
		const web = (
			JSON.parse(json.stdout).summary.certificates as { name: string; nextAttempt?: string }[]
		).find((c) => c.name === "web");
		const wait = Date.parse(web?.nextAttempt ?? "") - Date.now();
		expect(wait).toBeGreaterThan(55 * 60_000);
		expect(wait).toBeLessThanOrEqual(60 * 60_000);
	}, 60_000);
});
