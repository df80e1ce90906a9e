import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configProblems, loadConfigFile, parseConfig } from "../../src/config/load.js";
import { CertificateeError } from "../../src/errors.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-config-"));
function file(name: string, text: string): string {
	const p = join(dir, name);
	writeFileSync(p, text, { mode: 0o600 });
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
		// The misspelt key is one problem: "did you mean `path`?" stands for the missing `path` too.
		expect(problems.map((p) => p.path).sort()).toEqual(["interval", "listen", "targets[0].pth"]);
		expect(problems.find((p) => p.path === "targets[0].pth")?.message).toBe(
			"unknown key: did you mean `path`?",
		);
	});

	it("reports YAML syntax errors with their line", () => {
		const problems = problemsOf(() => loadConfigFile(file("broken.yaml", "targets: [\n  - a: b\n"), {}));
		expect(problems[0]?.path).toMatch(/^line \d+/);
	});
});

describe("config/load: what would fail later is rejected now", () => {
	it("rejects a probe without a port, on both HAProxy target kinds", () => {
		const problems = problemsOf(() =>
			parseConfig(
				{
					targets: [
						{ name: "r", type: "haproxy-runtime", socket: "/run/h.sock", crt_dir: "/c", probe: "127.0.0.1" },
						{
							name: "d",
							type: "haproxy-dataplane",
							endpoints: [
								{ name: "e", url: "http://127.0.0.1:5555", username: "u", password: "p", probe: "10.0.0.5" },
							],
						},
					],
				},
				"x.yaml",
				{ env: {} },
			),
		);
		expect(problems.map((p) => p.path)).toEqual(["targets[0].probe", "targets[1].endpoints[0].probe"]);
		expect(problems[0]?.message).toContain("host:port");
	});

	it("http01 via haproxy-map: targets must be HAProxy targets whose every node has http_address, one map per issuer", () => {
		const acme = (name: string, targets: string[]) => ({
			name,
			type: "acme",
			directory_url: "https://acme.test/dir",
			http01: { via: "haproxy-map", targets, map: "/etc/haproxy/acme.map" },
		});
		const raw = (withAddress: boolean) => ({
			sources: [acme("le", ["fra", "ams", "files", "nowhere"]), acme("other", ["fra"])],
			targets: [
				{
					name: "fra",
					type: "haproxy-runtime",
					socket: "/run/haproxy/admin.sock",
					crt_dir: "/etc/haproxy/certs",
					...(withAddress ? { http_address: "10.0.0.11:80" } : {}),
				},
				{
					name: "ams",
					type: "haproxy-dataplane",
					endpoints: [
						{
							name: "ams1",
							url: "http://10.0.1.1:5555",
							username: "u",
							password: "p",
							...(withAddress ? { http_address: "10.0.1.1:80" } : {}),
						},
					],
				},
				{ name: "files", type: "directory", path: "/srv/certs" },
			],
		});
		const problems = problemsOf(() => parseConfig(raw(false), "x.yaml", { env: {} }));
		expect(problems.map((p) => p.path)).toEqual([
			"targets[0].http_address",
			"targets[1].endpoints[0].http_address",
			"sources[0].http01.targets[2]",
			"sources[0].http01.targets[3]",
			"targets[0].http_address",
			"sources[1].http01.targets[0]",
		]);
		expect(problems[2]?.message).toContain('"files" is a directory target');
		expect(problems[3]?.message).toContain('"nowhere" is no target');
		expect(problems[5]?.message).toContain("sources[0] already uses map /etc/haproxy/acme.map");
		const fixed = raw(true);
		fixed.sources = [acme("le", ["fra", "ams"])];
		const { config } = parseConfig(fixed, "x.yaml", { env: {} });
		const http01 = config.sources[0]?.type === "acme" ? config.sources[0].http01 : undefined;
		expect(http01).toEqual({
			via: "haproxy-map",
			targets: ["fra", "ams"],
			map: "/etc/haproxy/acme.map",
			verify_timeout: 5000,
		});
		const relative = {
			...fixed,
			sources: [
				{ ...acme("le", ["fra"]), http01: { via: "haproxy-map", targets: ["fra"], map: "acme.map" } },
			],
		};
		expect(problemsOf(() => parseConfig(relative, "x.yaml", { env: {} }))[0]?.path).toBe(
			"sources[0].http01.map",
		);
	});

	it("rejects a wildcard name whose ACME issuer has no dns_hook, and accepts it with one or from a local CA", () => {
		const raw = (hook: boolean) => ({
			sources: [
				{
					name: "le",
					type: "acme",
					directory_url: "https://acme.test/dir",
					...(hook ? { dns_hook: ["/bin/true"] } : {}),
				},
				{ name: "ca", type: "local-ca" },
			],
			certificates: [
				{ name: "w", domains: ["example.com", "*.example.com"], issuer: "le" },
				{ name: "l", domains: ["*.local.test"], issuer: "ca" },
			],
		});
		const problems = problemsOf(() => parseConfig(raw(false), "x.yaml", { env: {} }));
		expect(problems).toHaveLength(1);
		expect(problems[0]?.path).toBe("certificates[0].domains[1]");
		expect(problems[0]?.message).toContain("sources[0].dns_hook");
		expect(() => parseConfig(raw(true), "x.yaml", { env: {} })).not.toThrow();
	});

	it("rejects an IP address whose ACME issuer answers only DNS-01 (RFC 8738), and accepts it with http01", () => {
		const raw = (http01: boolean) => ({
			sources: [
				{
					name: "le",
					type: "acme",
					directory_url: "https://acme.test/dir",
					dns_hook: ["/bin/true"],
					...(http01 ? { http01: { listen: "127.0.0.1:8402" } } : {}),
				},
				{ name: "plain", type: "acme", directory_url: "https://acme.test/dir" },
			],
			certificates: [
				{ name: "edge", domains: ["edge.example.com", "192.0.2.10", "2001:db8::10"], issuer: "le" },
				{ name: "plain", domains: ["198.51.100.7"], issuer: "plain" },
			],
		});
		const problems = problemsOf(() => parseConfig(raw(false), "x.yaml", { env: {} }));
		expect(problems.map((p) => p.path)).toEqual(["certificates[0].domains[1]", "certificates[0].domains[2]"]);
		expect(problems[0]?.message).toContain('IP address "192.0.2.10" can only be validated over HTTP-01');
		expect(problems[0]?.message).toContain("set sources[0].http01");
		expect(() => parseConfig(raw(true), "x.yaml", { env: {} })).not.toThrow();
	});

	it("takes profile on ACME issuers and certificates, and rejects it for a certificate of a local CA", () => {
		const raw = {
			sources: [
				{ name: "le", type: "acme", directory_url: "https://acme.test/dir", profile: "shortlived" },
				{ name: "ca", type: "local-ca" },
			],
			certificates: [
				{ name: "a", domains: ["a.test"], issuer: "le", profile: "classic" },
				{ name: "b", domains: ["b.test"], issuers: ["le", "ca"], profile: "shortlived" },
			],
		};
		const problems = problemsOf(() => parseConfig(raw, "x.yaml", { env: {} }));
		expect(problems).toHaveLength(1);
		expect(problems[0]?.path).toBe("certificates[1].profile");
		expect(problems[0]?.message).toContain('issuer "ca" is of type local-ca');
		const ok = { ...raw, certificates: [raw.certificates[0]!] };
		const { config } = parseConfig(ok, "x.yaml", { env: {} });
		expect(config.certificates[0]?.profile).toBe("classic");
		expect(config.sources[0]?.type === "acme" ? config.sources[0].profile : undefined).toBe("shortlived");
	});

	it("accepts a wildcard name whose ACME issuer has dns01.rfc2136, and resolves tsig_secret_file beside the config", () => {
		const raw = {
			sources: [
				{
					name: "le",
					type: "acme",
					directory_url: "https://acme.test/dir",
					dns01: {
						rfc2136: {
							server: "10.0.0.53",
							zone: "example.com",
							tsig_key_name: "certificatee",
							tsig_secret_file: "keys/tsig.key",
						},
					},
				},
			],
			certificates: [{ name: "w", domains: ["example.com", "*.example.com"], issuer: "le" }],
		};
		const { config } = parseConfig(raw, "/etc/certificatee/config.yaml", {
			env: {},
			baseDir: "/etc/certificatee",
		});
		const le = config.sources[0];
		expect(le?.type === "acme" && le.dns01?.rfc2136.tsig_secret_file).toBe("/etc/certificatee/keys/tsig.key");
	});

	it.each([
		[
			"certificates[0].key_typ",
			{
				sources: [{ name: "ca", type: "local-ca" }],
				certificates: [{ name: "c", domains: ["a.test"], issuer: "ca", key_typ: "rsa-2048" }],
			},
			"key_type",
		],
		[
			"targets[0].endpoints[0].pasword",
			{
				targets: [
					{
						name: "d",
						type: "haproxy-dataplane",
						endpoints: [{ name: "e", url: "http://h:1", username: "u", password: "p", pasword: "x" }],
					},
				],
			},
			"password",
		],
		["intervall", { intervall: "5m" }, "interval"],
		[
			"sources[0].directory_ulr",
			{ sources: [{ name: "le", type: "acme", directory_url: "https://a.test/d", directory_ulr: "x" }] },
			"directory_url",
		],
	])("suggests the closest key for %s", (path, raw, near) => {
		const problems = problemsOf(() => parseConfig(raw, "x.yaml", { env: {} }));
		const p = problems.find((q) => q.path === path);
		expect(p?.message).toBe(`unknown key: did you mean \`${near}\`?`);
	});

	it("a missing password_file is one problem naming the file, not a second one about password", () => {
		const problems = problemsOf(() =>
			parseConfig(
				{
					targets: [
						{
							name: "t",
							type: "haproxy-dataplane",
							endpoints: [
								{ name: "e", url: "http://127.0.0.1:1", username: "u", password_file: "secrets/dpapi" },
							],
						},
					],
				},
				"x.yaml",
				{ env: {}, baseDir: dir },
			),
		);
		expect(problems).toEqual([
			expect.objectContaining({
				path: "targets[0].endpoints[0].password_file",
				message: expect.stringContaining(join(dir, "secrets/dpapi")),
			}),
		]);
	});

	it("resolves every relative path against the configuration file's directory, not the working directory", () => {
		const sub = join(dir, "etc");
		mkdirSync(sub, { recursive: true });
		writeFileSync(join(sub, "dpapi.secret"), "from-beside-the-config\n", { mode: 0o600 });
		const f = join(sub, "relative.yaml");
		writeFileSync(
			f,
			[
				"state_dir: state",
				"sources:",
				"  - { name: files, type: directory, path: ./certs }",
				"  - { name: le, type: acme, directory_url: https://a.test/d, ca_file: ca.pem, dns_hook: [./hooks/dns.sh, extra], eab: { kid: k, hmac_key_file: dpapi.secret } }",
				"targets:",
				"  - { name: r, type: haproxy-runtime, socket: run/admin.sock, crt_dir: ../crt }",
				"  - { name: d, type: haproxy-dataplane, endpoints: [{ name: e, url: 'http://h:1', username: u, password_file: dpapi.secret, ca_file: api-ca.pem }] }",
				"  - { name: o, type: directory, path: /srv/out, on_change: { command: [bin/reload, now] } }",
				"",
			].join("\n"),
		);
		const cwd = process.cwd();
		process.chdir("/");
		try {
			const { config } = loadConfigFile(f, {});
			expect(config.state_dir).toBe(join(sub, "state"));
			const [files, le] = config.sources;
			expect(files?.type === "directory" && files.path).toBe(join(sub, "certs"));
			expect(le?.type === "acme" && [le.ca_file, le.dns_hook, le.eab?.hmac_key]).toEqual([
				join(sub, "ca.pem"),
				[join(sub, "hooks/dns.sh"), "extra"],
				"from-beside-the-config",
			]);
			const [r, d, o] = config.targets;
			expect(r?.type === "haproxy-runtime" && [r.socket, r.crt_dir, r.crt_dir_name]).toEqual([
				join(sub, "run/admin.sock"),
				join(dir, "crt"),
				"../crt",
			]);
			expect(d?.type === "haproxy-dataplane" && [d.endpoints[0]?.password, d.endpoints[0]?.ca_file]).toEqual([
				"from-beside-the-config",
				join(sub, "api-ca.pem"),
			]);
			expect(o?.type === "directory" && o.on_change?.command).toEqual([join(sub, "bin/reload"), "now"]);
		} finally {
			process.chdir(cwd);
		}
	});

	it("gives line and column for schema problems: an unknown key at its name, a missing key at its map", () => {
		const problems = problemsOf(() =>
			loadConfigFile(
				file(
					"located.yaml",
					"interval: 10m\ntargets:\n  - name: t\n    type: directory\n    layot: split\n  - { name: u, type: directory }\n",
				),
				{},
			),
		);
		expect(problems).toEqual(
			expect.arrayContaining([
				expect.objectContaining({ path: "targets[0].layot", line: 5, column: 5 }),
				expect.objectContaining({ path: "targets[1].path", line: 6, column: 5 }),
			]),
		);
	});

	it("CERTIFICATEE_LISTEN sets listen where the file leaves it out, and never overrides the file", () => {
		expect(parseConfig({}, "x.yaml", { env: { CERTIFICATEE_LISTEN: "0.0.0.0:9810" } }).config.listen).toBe(
			"0.0.0.0:9810",
		);
		expect(parseConfig({}, "x.yaml", { env: {} }).config.listen).toBe("127.0.0.1:9810");
		expect(
			parseConfig({ listen: "127.0.0.1:1" }, "x.yaml", { env: { CERTIFICATEE_LISTEN: "0.0.0.0:9810" } })
				.config.listen,
		).toBe("127.0.0.1:1");
		const problems = problemsOf(() => parseConfig({}, "x.yaml", { env: { CERTIFICATEE_LISTEN: "9810" } }));
		expect(problems.map((p) => p.path)).toEqual(["listen"]);
	});
});

describe("config: rollout", () => {
	const targets = [
		{ name: "lb1", type: "haproxy-runtime", socket: "/run/a.sock", crt_dir: "/etc/a" },
		{ name: "files", type: "directory", path: "/srv/certs" },
	];
	it("parses a count or a percentage, the checks and the hold", () => {
		const { config } = parseConfig(
			{ targets, rollout: { canary: "20%", verify: ["serial", "trust"], hold: "10m", targets: ["lb1"] } },
			"x.yaml",
			{ env: {} },
		);
		expect(config.rollout).toEqual({
			canary: "20%",
			verify: ["serial", "trust"],
			hold: 600_000,
			targets: ["lb1"],
		});
		expect(parseConfig({ targets, rollout: { canary: 1 } }, "x.yaml", { env: {} }).config.rollout?.hold).toBe(
			0,
		);
	});

	it("names a bad canary, an unknown check and a target a rollout cannot span", () => {
		const problems = problemsOf(() =>
			parseConfig(
				{ targets, rollout: { canary: "0%", verify: ["serial", "sni"], targets: ["files", "nowhere"] } },
				"x.yaml",
				{ env: {} },
			),
		);
		const byPath = new Map(problems.map((p) => [p.path, p.message]));
		expect(byPath.get("rollout.canary")).toContain("above 0%");
		expect(byPath.get("rollout.verify[1]")).toBeDefined();
		expect(byPath.get("rollout.targets[0]")).toContain('"files" is a directory target');
		expect(byPath.get("rollout.targets[1]")).toContain('"nowhere" is no target');
	});
});
