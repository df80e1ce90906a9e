/**
 * `certificatee status` as a child process (the built CLI) on a real HAProxy: the JSON matches what HAProxy
 * holds; the table through a pseudo-terminal (`script`) shows the same numbers, in colour; piped, no ANSI
 * codes; the progress bar appears on a TTY for a large fleet only, never in JSON or when piped.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { StatusSummary } from "../../src/metrics/status-view.js";
import { createTestCa, issueTestLeaf, type TestLeaf } from "../harness/certs.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { assertReloadSafe } from "../harness/invariant.js";
import { expectNoKeyMaterial } from "../harness/no-secrets.js";

const run = promisify(execFile);
const cli = join(import.meta.dirname, "../../dist/cli/main.js");
const dir = mkdtempSync(join(tmpdir(), "certificatee-status-"));
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[A-Za-z]`);
const stripAnsi = (text: string) => text.replace(new RegExp(ANSI.source, "g"), "");
// The suite sets NO_COLOR; a terminal user normally has it unset.
const { NO_COLOR: _ignored, ...baseEnv } = process.env;

let h: Haproxy;
let a: TestLeaf;
let legacyA: TestLeaf;
let bOld: TestLeaf;
let bNew: TestLeaf;
let other: TestLeaf;
let config: string;
let fleet: string;

async function certificatee(args: string[], env: NodeJS.ProcessEnv = baseEnv) {
	try {
		const r = await run(process.execPath, [cli, ...args], { env, cwd: dir });
		return { code: 0, stdout: r.stdout, stderr: r.stderr };
	} catch (e) {
		const err = e as { code: number; stdout: string; stderr: string };
		return { code: err.code, stdout: err.stdout, stderr: err.stderr };
	}
}

/** Runs the CLI on a pseudo-terminal (stdout and stderr both a TTY); returns everything it wrote. */
async function onTty(args: string[], env: NodeJS.ProcessEnv = baseEnv): Promise<string> {
	const cmd = [process.execPath, cli, ...args].join(" ");
	const r = await run("script", ["-qec", cmd, "/dev/null"], { env, cwd: dir });
	return r.stdout.replaceAll("\r\n", "\n");
}

function yaml(targets: string[]): string {
	return [
		`state_dir: ${join(dir, "state")}`,
		"log_level: warn",
		"sources:",
		`  - { name: files, type: directory, path: ${join(dir, "source")} }`,
		"targets:",
		...targets.map((t) => `  - ${t}`),
		"",
	].join("\n");
}

beforeAll(async () => {
	const ca = await createTestCa("status CA");
	a = await issueTestLeaf(ca, { names: ["a.test", "www.a.test"] });
	legacyA = await issueTestLeaf(ca, { names: ["a.test", "www.a.test"] });
	bOld = await issueTestLeaf(ca, { names: ["b.test"] });
	bNew = await issueTestLeaf(ca, { names: ["b.test"], notAfter: new Date(Date.now() + 40 * 86_400_000) });
	other = await issueTestLeaf(ca, { names: ["other.test"] });
	h = await startHaproxy({
		crtDir: {
			"a.pem": a.combinedPem,
			"legacy_a.pem": legacyA.combinedPem,
			"b.pem": bOld.combinedPem,
			"other.pem": other.combinedPem,
		},
	});
	mkdirSync(join(dir, "source"));
	mkdirSync(join(dir, "files"));
	writeFileSync(join(dir, "source", "a.pem"), a.combinedPem, { mode: 0o600 });
	writeFileSync(join(dir, "source", "b.pem"), bNew.combinedPem, { mode: 0o600 });
	const lb1 = `{ name: lb1, type: haproxy-runtime, socket: ${h.adminSocket}, crt_dir: ${h.crtDir}, probe: "${h.address}" }`;
	const down = (n: string) =>
		`{ name: ${n}, type: haproxy-runtime, socket: ${join(dir, `${n}.sock`)}, crt_dir: ${join(dir, n)} }`;
	const files = `{ name: files, type: directory, path: ${join(dir, "files")}, layout: kubernetes-tls }`;
	config = join(dir, "certificatee.yaml");
	writeFileSync(config, yaml([lb1, down("lb-down"), files]));
	fleet = join(dir, "fleet.yaml");
	// 22 endpoints: the HAProxy and 21 directories (each directory target is one endpoint).
	const dirs = Array.from({ length: 21 }, (_, i) => {
		mkdirSync(join(dir, `out-${i}`));
		return `{ name: out-${i}, type: directory, path: ${join(dir, `out-${i}`)}, layout: kubernetes-tls }`;
	});
	writeFileSync(fleet, yaml([lb1, ...dirs]));
}, 30_000);

// status only observes: after each test HAProxy is as reload-safe as it started.
afterEach(async () => {
	await assertReloadSafe(h);
});

afterAll(async () => {
	await h?.stop();
	rmSync(dir, { recursive: true, force: true });
});

describe("cli/status (the built CLI as a child process, on a real HAProxy)", () => {
	let summary: StatusSummary;

	it("--json: certificates, per-target converged/total, duplicates and unmanaged refs match HAProxy", async () => {
		const r = await certificatee(["--json", "status", "--config", config]);
		expect(r.code).toBe(0);
		expectNoKeyMaterial(r.stdout, [a.keyPem, legacyA.keyPem, bNew.keyPem, other.keyPem]);
		summary = (JSON.parse(r.stdout) as { summary: StatusSummary }).summary;
		const conv = (cert: string) =>
			Object.fromEntries(
				(summary.certificates.find((c) => c.name === cert)?.targets ?? []).map((t) => [
					t.target,
					`${t.converged}/${t.total}`,
				]),
			);
		expect(summary.certificates.map((c) => [c.name, c.serial])).toEqual([
			["a", normalSerial(a)],
			["b", normalSerial(bNew)],
		]);
		// a is served as desired on lb1; b is stale there; lb-down is down; the directory is empty.
		expect(conv("a")).toEqual({ lb1: "1/1", "lb-down": "0/1", files: "0/1" });
		expect(conv("b")).toEqual({ lb1: "0/1", "lb-down": "0/1", files: "0/1" });
		expect(summary.duplicates).toEqual([
			expect.objectContaining({
				target: "lb1",
				ref: "legacy_a.pem",
				class: "legacy-duplicate",
				keeper: "a.pem",
			}),
		]);
		expect(summary.unmanaged).toEqual([
			// The bind's default certificate, loaded from outside crt_dir: observed with its expiry, never written.
			expect.objectContaining({
				target: "lb1",
				endpoint: "lb1",
				ref: join(h.dir, "default.pem"),
				class: "unmanaged",
			}),
			{
				target: "lb1",
				endpoint: "lb1",
				ref: "other.pem",
				class: "unmanaged",
				notAfter: new Date(
					new (await import("node:crypto")).X509Certificate(other.certPem).validTo,
				).toISOString(),
			},
		]);
		expect(summary.endpoints.filter((e) => !e.up).map((e) => e.target)).toEqual(["lb-down"]);
		// Every ref HAProxy holds appears in the status, and status wrote nothing.
		const held = (await h.command("show ssl cert"))
			.split("\n")
			.filter((l) => l.startsWith(h.crtDir))
			.map((l) => l.slice(h.crtDir.length + 1))
			.sort();
		expect(held).toEqual(["a.pem", "b.pem", "legacy_a.pem", "other.pem"]);
		expect(existsSync(join(h.crtDir, "legacy_a.pem"))).toBe(true);
		expect(readFileSync(join(h.crtDir, "b.pem"), "utf8")).toBe(bOld.combinedPem);
	});

	it("on a TTY: an aligned table in colour with the same numbers as the JSON", async () => {
		const out = await onTty(["status", "--config", config]);
		expect(out).toMatch(ANSI);
		const plain = stripAnsi(out);
		const header = plain.split("\n").find((l) => l.startsWith("CERTIFICATE")) ?? "";
		expect(header.split(/\s{2,}/)).toEqual([
			"CERTIFICATE",
			"NAMES",
			"FROM",
			"EXPIRES IN",
			"RENEWS IN",
			"STATE",
			"lb1",
			"lb-down",
			"files",
		]);
		for (const c of summary.certificates) {
			const row = plain.split("\n").find((l) => l.startsWith(`${c.name} `)) ?? "";
			expect(row.trim().split(/\s+/).slice(-3)).toEqual(c.targets.map((t) => `${t.converged}/${t.total}`));
			// Columns line up with the header (searched after FROM: its temp path may hold "0/" or "1/").
			expect(row.indexOf(`${c.targets[0]?.converged}/`, header.indexOf("EXPIRES IN"))).toBe(
				header.indexOf("lb1"),
			);
		}
		expect(plain).toContain("legacy_a.pem");
		expect(plain).toContain("other.pem: unmanaged");
		expect(plain).toContain("lb-down/lb-down down:");
		// Red for the unconverged cells, green for the converged one.
		expect(out).toContain("\u001b[32m1/1");
		expect(out).toContain("\u001b[31m0/1");
		expect(out).not.toContain("observing endpoints");
	});

	it("piped: the same table without ANSI codes; NO_COLOR turns colours off on a TTY", async () => {
		const r = await certificatee(["status", "--config", config]);
		expect(r.stdout).not.toMatch(ANSI);
		expect(r.stderr).not.toMatch(ANSI);
		expect(r.stdout).toMatch(/^a\s+a\.test,www\.a\.test\s+.*1\/1\s+0\/1\s+0\/1$/m);
		// FROM names the source and the file, not its full path: the table stays narrow.
		expect(r.stdout).toMatch(/^a\s+a\.test,www\.a\.test\s+files: a\.pem\s/m);
		const table = r.stdout.split("\n\n")[0]?.split("\n") ?? [];
		expect(Math.max(...table.map((l) => l.length))).toBeLessThanOrEqual(100);
		// A down endpoint is said once, not again for every certificate it should carry.
		expect(r.stdout.match(/lb-down\/lb-down/g)).toHaveLength(1);
		const detail = await certificatee(["status", "--endpoint", "lb1", "--config", config]);
		expect(detail.stdout).toMatch(/^ {4}storage-replace b\.pem serial \S+: /m);
		expect(detail.stdout).toContain("legacy_a.pem: legacy duplicate of a.pem");
		// --endpoint lb1: only lb1's column and lines.
		expect(detail.stdout).toMatch(/^CERTIFICATE\s+NAMES\s+FROM\s+EXPIRES IN\s+RENEWS IN\s+STATE\s+lb1$/m);
		expect(detail.stdout).not.toContain("lb-down");
		expect(detail.stdout).not.toMatch(/^.*\bfiles\s*$/m);
		const noColour = await onTty(["status", "--config", config], { ...baseEnv, NO_COLOR: "1" });
		expect(noColour).toContain("CERTIFICATE");
		expect(noColour).not.toMatch(ANSI);
	});

	it("a fleet of more than 20 endpoints shows a progress bar on a TTY only, never in JSON or piped", async () => {
		const tty = await onTty(["status", "--config", fleet]);
		expect(tty).toContain("observing endpoints [");
		expect(tty).toContain("22/22");
		expect(tty).toContain("CERTIFICATE");
		const json = await onTty(["--json", "status", "--config", fleet]);
		expect(json).not.toContain("observing endpoints");
		expect(() => JSON.parse(json)).not.toThrow();
		const piped = await certificatee(["status", "--config", fleet]);
		expect(piped.stderr + piped.stdout).not.toContain("observing endpoints");
	});
});

function normalSerial(leaf: TestLeaf): string {
	return leaf.serial.toUpperCase().replace(/^0+/, "");
}
