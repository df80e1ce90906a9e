/**
 * Every row of the README's exit-code table, as the operator meets it: the built CLI as a child process, a
 * real HAProxy, a directory source, and failures made of real things (a missing socket, a closed port, an
 * invalid file, an ACME server nobody listens for). Each row checks the exit code and the last line, which
 * says "converged" only when every endpoint was observed and is in sync.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { stopReloadSafe } from "../harness/invariant.js";
import { expectNoKeyMaterial } from "../harness/no-secrets.js";
import { freePorts } from "../harness/ports.js";

let dir: string;
let h: Haproxy;
let v1: TestLeaf;
let v2: TestLeaf;
let rsa: TestLeaf;
let closedPort: number;
let n = 0;

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-exit-"));
	const ca = await createTestCa("exit codes CA");
	v1 = await issueTestLeaf(ca, { names: ["shop.test"] });
	v2 = await issueTestLeaf(ca, { names: ["shop.test"] });
	// HAProxy holds only ECDSA certificates: a client of an RSA certificate not deployed yet is refused.
	rsa = await issueTestLeaf(ca, { names: ["first.test"], keyType: "rsa-2048" });
	h = await startHaproxy({ crtDir: { "shop.pem": v1.combinedPem } });
	[closedPort] = (await freePorts(1)) as [number];
}, 30_000);

afterAll(async () => {
	rmSync(dir, { recursive: true, force: true });
	// Last: a failed check must not skip the rest of the cleanup.
	await stopReloadSafe(h);
});

type Files = Record<string, string>;

/** A fresh state directory and source directory per row, so no row sees another's state. */
function setup(options: { files?: Files; socket?: string; probe?: string | null; acme?: boolean }): string {
	const row = join(dir, `row-${++n}`);
	mkdirSync(join(row, "source"), { recursive: true });
	for (const [name, pem] of Object.entries(options.files ?? { "shop.pem": v1.combinedPem })) {
		writeFileSync(join(row, "source", name), pem, { mode: 0o600 });
	}
	const probe = options.probe === undefined ? h.address : options.probe;
	const config = {
		state_dir: join(row, "state"),
		sources: [
			{ name: "files", type: "directory", path: join(row, "source") },
			...(options.acme
				? [{ name: "le", type: "acme", directory_url: `http://127.0.0.1:${closedPort}/dir`, http_retries: 0 }]
				: []),
		],
		certificates: options.acme ? [{ name: "web", domains: ["web.test"], issuer: "le" }] : [],
		targets: [
			{
				name: "lb1",
				type: "haproxy-runtime",
				socket: options.socket ?? h.adminSocket,
				crt_dir: h.crtDir,
				...(probe === null ? {} : { probe }),
			},
		],
	};
	const file = join(row, "certificatee.yaml");
	writeFileSync(file, JSON.stringify(config, null, 2));
	return file;
}

const lastLine = (stdout: string) => stdout.trimEnd().split("\n").at(-1) ?? "";

interface Row {
	row: string;
	args: string[];
	config: () => string;
	code: number;
	last?: RegExp;
	stdout?: RegExp;
	stderr?: RegExp;
}

const rows: Row[] = [
	{
		row: "plan, everything observed and in sync: 0",
		args: ["plan"],
		config: () => setup({}),
		code: 0,
		last: /^converged: nothing to do$/,
	},
	{
		row: "sync, everything observed and in sync: 0",
		args: ["sync", "--once"],
		config: () => setup({}),
		code: 0,
		last: /^converged: nothing to do$/,
	},
	{
		row: "plan, changes pending: 2",
		args: ["plan"],
		config: () => setup({ files: { "shop.pem": v2.combinedPem } }),
		code: 2,
		stdout: /^2 changes pending$/m,
		last: /^not converged: 2 pending \(0\/1 endpoints converged\)$/,
	},
	{
		row: "plan, a certificate due to be ordered (never issued): 2",
		args: ["plan"],
		config: () => setup({ acme: true }),
		code: 2,
		stdout: /^order web from le: no certificate issued yet$/m,
		last: /^not converged: 1 pending/,
	},
	{
		row: "plan, a first rollout whose probe HAProxy refuses (no certificate for the name yet): 2, the probe pending, on one line",
		args: ["plan"],
		config: () => setup({ files: { "shop.pem": v1.combinedPem, "first.pem": rsa.combinedPem } }),
		code: 2,
		stdout:
			/^ {4}served first\.test: TLS probe of 127\.0\.0\.1:\d+ for first\.test: the server refused the handshake \(TLS alert: handshake failure\): it holds no certificate for first\.test for a client of key type rsa \(want [0-9A-F]+\)$/m,
		last: /^not converged: 2 pending \(0\/1 endpoints converged\)$/,
	},
	{
		row: "plan, every endpoint down (missing socket): 1, never 'converged'",
		args: ["plan"],
		config: () => setup({ socket: join(dir, "no-such.sock") }),
		code: 1,
		stdout: /lb1: skipped: ENDPOINT_UNAVAILABLE/,
		last: /^not converged: 1 endpoint unreachable \(0\/1 endpoints converged\)$/,
	},
	{
		row: "sync, an endpoint down: 1",
		args: ["sync", "--once"],
		config: () => setup({ socket: join(dir, "no-such.sock") }),
		code: 1,
		last: /^not converged: 1 endpoint unreachable/,
	},
	{
		row: "sync, a source file invalid (the valid ones delivered): 1",
		args: ["sync", "--once"],
		config: () => setup({ files: { "shop.pem": v1.combinedPem, "broken.pem": "not a certificate\n" } }),
		code: 1,
		stdout: /^source problem: .*broken\.pem/m,
		last: /^not converged: 1 source problem \(1\/1 endpoints converged\)$/,
	},
	{
		row: "sync, an order failed (ACME server unreachable): 1",
		args: ["sync", "--once"],
		config: () => setup({ acme: true }),
		code: 1,
		stdout: /^order web from le failed: ACME_ERROR: .*ECONNREFUSED/m,
		// The endpoint waits for the certificate it should serve: not converged, as status and the fleet page say.
		last: /^not converged: 1 failed order \(0\/1 endpoints converged\)$/,
	},
	{
		row: "sync, the probe cannot connect (closed port): 1",
		args: ["sync", "--once"],
		config: () => setup({ probe: `127.0.0.1:${closedPort}` }),
		code: 1,
		last: /^not converged: 1 failed probe \(0\/1 endpoints converged\)$/,
	},
	{
		row: "sync, a probe address without a port: 1 (rejected when the configuration is loaded)",
		args: ["sync", "--once"],
		config: () => setup({ probe: "127.0.0.1" }),
		code: 1,
		stderr: /targets\[0\]\.probe \(line \d+, column \d+\): expected "host:port"/,
	},
	{
		row: "plan, the probe cannot connect: 1 (it could not observe what is served)",
		args: ["plan"],
		config: () => setup({ probe: `127.0.0.1:${closedPort}` }),
		code: 1,
		last: /^not converged: 1 failed probe/,
	},
	{
		row: "status --endpoint with a name that does not exist: 1, listing the valid names",
		args: ["status", "--endpoint", "lb-typo"],
		config: () => setup({}),
		code: 1,
		stderr: /no endpoint named "lb-typo"[\s\S]*hint: endpoints: lb1/,
	},
	{
		row: "an invalid configuration: 1",
		args: ["plan"],
		config: () => {
			const file = join(dir, `invalid-${++n}.yaml`);
			writeFileSync(file, "interval: forever\n");
			return file;
		},
		code: 1,
		stderr: /interval/,
	},
	{
		row: "a usage error (unknown option): 1",
		args: ["sync", "--no-such-option"],
		config: () => setup({}),
		code: 1,
		stderr: /unknown option/,
	},
];

describe("exit codes of plan, sync and status (the README's table, row by row)", () => {
	for (const r of rows) {
		it(r.row, async () => {
			const result = await certificatee([...r.args, "--config", r.config()]);
			const all = `${result.stdout}\n${result.stderr}`;
			expect(result.code, all).toBe(r.code);
			if (r.last) expect(lastLine(result.stdout), all).toMatch(r.last);
			if (r.stdout) expect(result.stdout, all).toMatch(r.stdout);
			if (r.stderr) expect(result.stderr, all).toMatch(r.stderr);
			// "converged" appears only as the verdict of a converged run.
			if (r.code !== 0) expect(result.stdout).not.toMatch(/^converged/m);
			expectNoKeyMaterial(all, [v1.keyPem, v2.keyPem, rsa.keyPem]);
		});
	}

	it("--json carries the same verdict: sync with an endpoint down exits 1 and its report names the failure", async () => {
		const result = await certificatee([
			"--json",
			"sync",
			"--once",
			"--config",
			setup({ socket: join(dir, "gone.sock") }),
		]);
		expect(result.code).toBe(1);
		const report = JSON.parse(result.stdout) as {
			targets: Array<{ endpoints: Array<{ ok: boolean; error?: { code: string } }> }>;
		};
		expect(report.targets[0]?.endpoints[0]).toMatchObject({
			ok: false,
			error: { code: "ENDPOINT_UNAVAILABLE" },
		});
	});
});
