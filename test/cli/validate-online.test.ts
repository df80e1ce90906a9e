/**
 * `validate --online` against real processes: a live HAProxy (runtime socket and TLS probe), the Data Plane
 * API double in front of it, and Pebble's ACME directory; and a dead one of each (a missing socket, closed
 * ports). Each check is reported ok or with its error, and one dead address makes the exit code 1.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { type DpapiDouble, startDpapiDouble } from "../harness/dpapi-double/index.js";
import { freePort, HAPROXY_VERSION, type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { type PebbleHandle, startPebble } from "../harness/pebble.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-online-"));
let h: Haproxy;
let d: DpapiDouble;
let pebble: PebbleHandle;
let closedPort: number;

beforeAll(async () => {
	const leaf = await issueTestLeaf(await createTestCa("online CA"), { names: ["a.online.test"] });
	[h, pebble] = await Promise.all([
		// A second stats socket below `level admin`: it answers show info, not the certificate commands.
		startHaproxy({
			crtDir: { "a.pem": leaf.combinedPem },
			globalLines: ["stats socket unix@{dir}/user.sock mode 600 level user"],
		}),
		startPebble({ validation: "always-valid" }),
		ensureBuilt(),
	]).then(([haproxy, p]) => [haproxy, p] as const);
	d = await startDpapiDouble({ haproxy: h });
	closedPort = await freePort();
}, 60_000);

afterAll(async () => {
	await d?.close();
	await h?.stop();
	await pebble?.stop();
	rmSync(dir, { recursive: true, force: true });
});

interface Report {
	ok: boolean;
	online: Array<{
		kind: string;
		name: string;
		ok: boolean;
		detail?: string;
		error?: { code: string; message: string };
	}>;
}

function configFile(name: string, live: boolean, dead: boolean): string {
	const runtime = [
		...(live
			? [
					{
						name: "live-socket",
						type: "haproxy-runtime",
						socket: h.adminSocket,
						crt_dir: h.crtDir,
						probe: h.address,
						timeout: "2s",
					},
				]
			: []),
		...(dead
			? [
					{
						name: "dead-socket",
						type: "haproxy-runtime",
						socket: join(dir, "missing.sock"),
						crt_dir: h.crtDir,
						probe: `127.0.0.1:${closedPort}`,
						timeout: "2s",
					},
				]
			: []),
	];
	const endpoints = [
		...(live ? [{ name: "live-api", url: d.url, username: d.username, password: d.password }] : []),
		...(dead
			? [
					{
						name: "dead-api",
						url: `http://127.0.0.1:${closedPort}`,
						username: "admin",
						password: "dead-api-secret",
						timeout: "2s",
					},
				]
			: []),
		...(live
			? [{ name: "wrong-password", url: d.url, username: d.username, password: "not-the-password" }]
			: []),
	];
	const config = {
		state_dir: join(dir, "state"),
		sources: [
			...(live
				? [{ name: "pebble", type: "acme", directory_url: pebble.directoryUrl, ca_file: pebble.caFile }]
				: []),
			...(dead
				? [{ name: "dead-acme", type: "acme", directory_url: `https://127.0.0.1:${closedPort}/dir` }]
				: []),
		],
		targets: [...runtime, { name: "api", type: "haproxy-dataplane", storage_dir: h.crtDir, endpoints }],
	};
	const file = join(dir, name);
	writeFileSync(file, JSON.stringify(config, null, 2));
	return file;
}

describe("cli/validate --online", () => {
	it("reports every live socket, API, probe and ACME directory as ok and exits 0, without the wrong-password endpoint", async () => {
		const file = configFile("live.yaml", true, false);
		// The wrong-password endpoint is the live API with a bad secret: take it out for the all-ok run.
		const text = JSON.parse(readFileSync(file, "utf8")) as {
			targets: Array<{ endpoints?: Array<{ name: string }> }>;
		};
		const api = text.targets.at(-1);
		if (api?.endpoints) api.endpoints = api.endpoints.filter((e) => e.name !== "wrong-password");
		writeFileSync(file, JSON.stringify(text));
		const r = await certificatee(["validate", "--online", "--config", file]);
		expect(r.stdout).toContain("online: 4/4 ok");
		// The version the worker's `show info` says: "HAProxy 2.6.12-1+deb12u4", "HAProxy 3.4.0-64a335366".
		expect(r.stdout).toMatch(
			new RegExp(
				`ok {4}runtime-socket live-socket \\(.*admin\\.sock\\): HAProxy ${HAPROXY_VERSION.replaceAll(".", "\\.")}[-, ]`,
			),
		);
		expect(r.stdout).toMatch(/ok {4}probe live-socket \(127\.0\.0\.1:\d+\): TLS handshake/);
		expect(r.stdout).toMatch(
			/ok {4}dataplane-api api\/live-api \(http:\/\/127\.0\.0\.1:\d+\/\): Data Plane API v3\.\d.*, 1 file in storage/,
		);
		expect(r.stdout).toMatch(/ok {4}acme-directory pebble \(https:\/\/.*\): ACME directory/);
		expect(r.code).toBe(0);
	});

	it("reports each dead socket, API, probe and ACME directory with its error, and a rejected password, then exits 1", async () => {
		const file = configFile("both.yaml", true, true);
		const r = await certificatee(["--json", "validate", "--online", "--config", file], { timeoutMs: 60_000 });
		expect(r.code).toBe(1);
		const report = JSON.parse(r.stdout) as Report;
		expect(report.ok).toBe(false);
		const byName = new Map(report.online.map((c) => [`${c.kind} ${c.name}`, c]));
		for (const ok of [
			"runtime-socket live-socket",
			"probe live-socket",
			"dataplane-api api/live-api",
			"acme-directory pebble",
		])
			expect(byName.get(ok)?.ok, ok).toBe(true);
		const failed = (key: string) => {
			const c = byName.get(key);
			expect(c?.ok, key).toBe(false);
			return c?.error?.message ?? "";
		};
		expect(failed("runtime-socket dead-socket")).toContain("missing.sock");
		expect(failed("probe dead-socket")).toMatch(new RegExp(`127\\.0\\.0\\.1:${closedPort}`));
		expect(failed("dataplane-api api/dead-api")).toMatch(/dead-api/);
		expect(byName.get("dataplane-api api/wrong-password")?.error?.code).toBe("ENDPOINT_AUTH");
		expect(failed("acme-directory dead-acme")).toMatch(/ECONNREFUSED|connect/);
		expect(r.stdout + r.stderr).not.toContain("dead-api-secret");
		expect(r.stdout + r.stderr).not.toContain("not-the-password");

		const text = await certificatee(["validate", "--online", "--config", file], { timeoutMs: 60_000 });
		expect(text.code).toBe(1);
		expect(text.stdout).toContain("online: 4/9 ok");
		expect(text.stdout).toMatch(/FAIL {2}runtime-socket dead-socket .*missing\.sock/);
		expect(text.stdout).toMatch(/FAIL {2}acme-directory dead-acme/);
	});

	it("a stats socket below level admin fails the check with the hint, as the first cycle would", async () => {
		const file = join(dir, "user-level.yaml");
		const socket = join(dirname(h.adminSocket), "user.sock");
		writeFileSync(
			file,
			JSON.stringify({
				state_dir: join(dir, "state"),
				targets: [{ name: "user-socket", type: "haproxy-runtime", socket, crt_dir: h.crtDir }],
			}),
		);
		const r = await certificatee(["--json", "validate", "--online", "--config", file]);
		expect(r.code).toBe(1);
		const check = (JSON.parse(r.stdout) as Report).online.find((c) => c.kind === "runtime-socket");
		expect(check?.ok).toBe(false);
		expect(check?.error?.message).toContain("Permission denied");
		expect(JSON.stringify(check)).toContain("level admin");
	});

	it("an API that stores certificates elsewhere than storage_dir is a failure naming the right directory", async () => {
		const file = join(dir, "storage.yaml");
		writeFileSync(
			file,
			JSON.stringify({
				state_dir: join(dir, "state"),
				targets: [
					{
						name: "api",
						type: "haproxy-dataplane",
						storage_dir: "/etc/haproxy/elsewhere",
						endpoints: [{ name: "e", url: d.url, username: d.username, password: d.password }],
					},
				],
			}),
		);
		const r = await certificatee(["validate", "--online", "--config", file]);
		expect(r.code).toBe(1);
		expect(r.stdout).toContain(`hint: set storage_dir: ${h.crtDir}`);
	});
});
