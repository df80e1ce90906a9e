import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configProblems, loadConfigFile, parseConfig } from "../../src/config/load.js";
import { CertificateeError } from "../../src/errors.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-config-"));
function file(name: string, text: string): string {
	const p = join(dir, name);
	writeFileSync(p, text);
	return p;
}

function problemsOf(fn: () => unknown): Array<{ path: string; message: string }> {
	try {
		fn();
	} catch (e) {
		expect(e).toBeInstanceOf(CertificateeError);
		return configProblems(e as CertificateeError);
	}
	throw new Error("expected a configuration error");
}

const full = `
state_dir: ./.certificatee
interval: 10m
listen: 127.0.0.1:9810
log_level: info
sources:
  - { name: files, type: directory, path: ./certs }
  - { name: le, type: acme, directory_url: https://acme.example/dir, email: ops@example.com }
  - { name: local, type: local-ca }
certificates:
  - { name: example-com, domains: [example.com, www.example.com], issuer: le }
targets:
  - name: fra-staging
    type: haproxy-dataplane
    endpoints:
      - { name: haproxy-fra1, url: "https://10.0.0.5:5555", username: admin, password: "\${DPAPI_PASSWORD}" }
  - { name: lb1, type: haproxy-runtime, socket: /run/haproxy/admin.sock, crt_dir: /etc/haproxy/certs }
  - { name: serving, type: directory, path: /etc/pki/serving, layout: kubernetes-tls }
`;

describe("config/load", () => {
	it("loads the documented example with defaults and interpolated secrets", () => {
		const { config } = loadConfigFile(file("full.yaml", full), { DPAPI_PASSWORD: "s3cret" });
		expect(config.interval).toBe(600_000);
		expect(config.sources.map((s) => s.type)).toEqual(["directory", "acme", "local-ca"]);
		const t = config.targets[0];
		expect(t?.type === "haproxy-dataplane" && t.endpoints[0]?.password).toBe("s3cret");
	});

	it("reads password_file into password", () => {
		const secret = file("secret", "from-file\n");
		const { config } = parseConfig(
			{
				targets: [
					{
						name: "t",
						type: "haproxy-dataplane",
						endpoints: [{ name: "e", url: "http://127.0.0.1:5555", username: "u", password_file: secret }],
					},
				],
			},
			"x.yaml",
			{ env: {} },
		);
		const t = config.targets[0];
		expect(t?.type === "haproxy-dataplane" && t.endpoints[0]?.password).toBe("from-file");
	});

	it.each([
		[
			"unknown key",
			{ targets: [{ name: "t", type: "directory", path: "/x", layot: "split" }] },
			"targets[0].layot",
		],
		["wrong type", { interval: 5 }, "interval"],
		["bad duration", { interval: "10 minutes" }, "interval"],
		[
			"bad URL",
			{
				targets: [
					{
						name: "t",
						type: "haproxy-dataplane",
						endpoints: [{ name: "e", url: "ftp://x", username: "u", password: "p" }],
					},
				],
			},
			"targets[0].endpoints[0].url",
		],
		[
			"missing env var",
			{ sources: [{ name: "s", type: "directory", path: "$" + "{NO_SUCH_VAR}" }] },
			"sources[0].path",
		],
		[
			"unknown issuer",
			{ certificates: [{ name: "c", domains: ["a.test"], issuer: "nope" }] },
			"certificates[0].issuer",
		],
		[
			"duplicate name",
			{
				sources: [
					{ name: "s", type: "local-ca" },
					{ name: "s", type: "local-ca" },
				],
			},
			"sources[1].name",
		],
		["unknown target type", { targets: [{ name: "t", type: "nginx" }] }, "targets[0].type"],
	])("%s names its path", (_what, raw, path) => {
		const problems = problemsOf(() => parseConfig(raw, "bad.yaml", { env: {} }));
		expect(problems.map((p) => p.path)).toContain(path);
	});

	it("an unreadable password_file names the path and the file", () => {
		const unreadable = file("unreadable", "x");
		chmodSync(unreadable, 0o000);
		const missing = join(dir, "missing");
		const problems = problemsOf(() =>
			parseConfig(
				{
					targets: [
						{
							name: "t",
							type: "haproxy-dataplane",
							endpoints: [{ name: "e", url: "http://127.0.0.1:1", username: "u", password_file: missing }],
						},
					],
				},
				"bad.yaml",
				{ env: {} },
			),
		);
		expect(problems[0]?.path).toBe("targets[0].endpoints[0].password_file");
		expect(problems[0]?.message).toContain(missing);
	});

	it("lists several mistakes at once", () => {
		const problems = problemsOf(() =>
			loadConfigFile(
				file(
					"three.yaml",
					"interval: soon\nlisten: nowhere\ntargets:\n  - { name: t, type: directory, pth: /x }\n",
				),
				{},
			),
		);
		expect(problems.map((p) => p.path).sort()).toEqual([
			"interval",
			"listen",
			"targets[0].path",
			"targets[0].pth",
		]);
	});

	it("reports YAML syntax errors with their line", () => {
		const problems = problemsOf(() => loadConfigFile(file("broken.yaml", "targets: [\n  - a: b\n"), {}));
		expect(problems[0]?.path).toMatch(/^line \d+/);
	});
});
