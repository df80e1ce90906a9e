import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { certificatee as cli, ensureBuilt } from "../harness/cli.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-cli-"));
const certificatee = (args: string[], env: Record<string, string> = {}) => cli(args, { cwd: dir, env });

beforeAll(ensureBuilt);

describe("cli/validate (the built CLI as a child process)", () => {
	it("exits 0 on a valid configuration", async () => {
		const f = join(dir, "good.yaml");
		writeFileSync(f, "sources:\n  - { name: local, type: local-ca }\n");
		const r = await certificatee(["validate", "--config", f]);
		expect(r.code).toBe(0);
		expect(r.stdout).toContain("valid");
	});

	it("exits 1 and lists all three mistakes with their paths", async () => {
		const f = join(dir, "bad.yaml");
		writeFileSync(
			f,
			"interval: forever\nsources:\n  - { name: s, type: directory, path: /x, recursive: true }\ncertificates:\n  - { name: c, domains: [a.test], issuer: nobody }\n",
		);
		const r = await certificatee(["validate", "--config", f]);
		expect(r.code).toBe(1);
		expect(r.stdout).toContain("3 problems");
		expect(r.stdout).toContain("interval (line 1, column 1): expected a duration");
		expect(r.stdout).toContain("sources[0].recursive (line 3, column 43): unknown key");
		expect(r.stdout).toContain("certificates[0].issuer (line 5, column 35): no issuer source");
		// In file order.
		expect(r.stdout.indexOf("interval (")).toBeLessThan(r.stdout.indexOf("certificates[0].issuer ("));
	});

	it("names a missing or non-base64 dns01.rfc2136.tsig_secret_file, and accepts tsig-keygen's key file", async () => {
		const f = join(dir, "rfc2136.yaml");
		writeFileSync(
			f,
			"sources:\n  - name: le\n    type: acme\n    directory_url: https://acme.test/dir\n    dns01:\n      rfc2136: { server: 127.0.0.1, zone: example.com, tsig_key_name: k, tsig_secret_file: tsig.key }\ncertificates:\n  - { name: w, domains: [example.com, '*.example.com'], issuer: le }\n",
		);
		const missing = await certificatee(["validate", "--config", f]);
		expect(missing.code).toBe(1);
		expect(missing.stdout).toContain(
			`dns01.rfc2136.tsig_secret_file ${join(dir, "tsig.key")} cannot be read: ENOENT`,
		);
		writeFileSync(join(dir, "tsig.key"), "not a secret!\n", { mode: 0o600 });
		const garbled = await certificatee(["validate", "--config", f]);
		expect(garbled.code).toBe(1);
		expect(garbled.stdout).toContain("does not hold a base64 secret");
		expect(garbled.stdout).not.toContain("not a secret!");
		writeFileSync(
			join(dir, "tsig.key"),
			'key "k" {\n\talgorithm hmac-sha256;\n\tsecret "m6c6m5mX4cWx1cMHc4p0wV1mB+Q0Ah1Yqj3pB5L1nXk=";\n};\n',
		);
		const good = await certificatee(["validate", "--config", f]);
		expect(good.stdout).toContain("valid");
		expect(good.stdout).not.toContain("m6c6m5mX4cWx");
		expect(good.code).toBe(0);
	});

	it("rejects two certificates whose names give one storage name, naming both", async () => {
		const f = join(dir, "collide.yaml");
		writeFileSync(
			f,
			"sources:\n  - { name: ca, type: local-ca }\ncertificates:\n  - { name: example.com, domains: [example.com], issuer: ca }\n  - { name: example_com, domains: [www.example.com], issuer: ca }\n",
		);
		const r = await certificatee(["validate", "--config", f]);
		expect(r.code).toBe(1);
		expect(r.stdout).toContain("certificates[1].name");
		expect(r.stdout).toContain(
			'"example_com" and "example.com" (certificates[0]) both become example_com.pem',
		);
	});

	it("rejects two source files whose certificates give one storage name", async () => {
		const ca = await createTestCa("validate CA");
		const source = join(dir, "colliding-source");
		mkdirSync(source);
		for (const [file, name] of [
			["example.com.pem", "example.com"],
			["example_com.pem", "www.example.com"],
		] as const)
			writeFileSync(join(source, file), (await issueTestLeaf(ca, { names: [name] })).combinedPem);
		const f = join(dir, "collide-files.yaml");
		writeFileSync(f, `sources:\n  - { name: files, type: directory, path: ${source} }\n`);
		const r = await certificatee(["validate", "--config", f]);
		expect(r.code).toBe(1);
		expect(r.stdout).toMatch(/certificates: "example_com" and "example\.com" all become example_com\.pem/);
	});

	it("reads CERTIFICATEE_CONFIG and prints JSON with --json", async () => {
		const f = join(dir, "env.yaml");
		writeFileSync(f, "listen: bad\n");
		const r = await certificatee(["--json", "validate"], { CERTIFICATEE_CONFIG: f });
		expect(r.code).toBe(1);
		const report = JSON.parse(r.stdout) as { ok: boolean; problems: Array<{ path: string }> };
		expect(report.ok).toBe(false);
		expect(report.problems.map((p) => p.path)).toEqual(["listen"]);
	});

	it("says clearly when the configuration file is missing", async () => {
		const r = await certificatee(["validate", "--config", join(dir, "nope.yaml")]);
		expect(r.code).toBe(1);
		expect(r.stdout).toContain("nope.yaml");
		expect(r.stdout).toContain("ENOENT");
		expect(r.stdout).toContain("CONFIG_NOT_FOUND");
		expect(r.stdout).toMatch(/hint: pass -c FILE .* \$CERTIFICATEE_CONFIG/);
		const status = await certificatee(["status"], { CERTIFICATEE_CONFIG: "" });
		expect(status.code).toBe(1);
		expect(status.stderr).toMatch(/CONFIG_NOT_FOUND: \.\/certificatee\.yaml: .*\n {2}hint: pass -c FILE/);
	});

	it("an unknown source or target type names the value and suggests the closest kind", async () => {
		const f = join(dir, "kind.yaml");
		writeFileSync(
			f,
			"sources:\n  - { name: files, type: directry, path: /etc/certs }\ntargets:\n  - { name: lb, type: haproxy-runtim, socket: /run/h.sock, crt_dir: /etc/h }\n",
		);
		const r = await certificatee(["validate", "--config", f]);
		expect(r.code).toBe(1);
		expect(r.stdout).toContain(
			'sources[0].type (line 2, column 20): unknown type "directry": did you mean `directory`?',
		);
		expect(r.stdout).toContain(
			'targets[0].type (line 4, column 17): unknown type "haproxy-runtim": did you mean `haproxy-runtime`?',
		);
		expect(r.stdout).not.toContain("Invalid discriminator");
	});

	it("prints the version and help", async () => {
		const v = await certificatee(["version"]);
		expect(v.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
		const h = await certificatee(["--help"]);
		expect(h.code).toBe(0);
		for (const c of ["validate", "plan", "sync", "status", "run"]) expect(h.stdout).toContain(c);
	});
});

describe("cli/validate: source certificates", () => {
	it("lists every invalid file of a directory source and exits 1", async () => {
		const certs = join(dir, "certs");
		const { mkdirSync } = await import("node:fs");
		mkdirSync(certs, { recursive: true });
		writeFileSync(join(certs, "junk.pem"), "not a certificate\n");
		writeFileSync(join(certs, "half.crt"), "-----BEGIN CERTIFICATE-----\nAAAA\n");
		const f = join(dir, "sources.yaml");
		writeFileSync(f, `sources:\n  - { name: files, type: directory, path: ${certs} }\n`);
		const r = await certificatee(["validate", "--config", f]);
		expect(r.code).toBe(1);
		expect(r.stdout).toContain("2 problems");
		expect(r.stdout).toContain("junk.pem");
		expect(r.stdout).toContain("half.crt");
		expect(r.stdout).toMatch(/sources\[0\]\.path: BUNDLE_NOT_PEM: .*junk\.pem/);
		const json = await certificatee(["--json", "validate", "--config", f]);
		const report = JSON.parse(json.stdout) as { problems: Array<{ code?: string; message: string }> };
		expect(report.problems.map((p) => p.code).sort()).toEqual(["BUNDLE_NOT_PEM", "BUNDLE_NO_KEY"]);
	});
});

describe("cli/validate: what would fail later", () => {
	it("rejects a probe without a port, a wildcard without dns_hook and a misspelt key, each at its line and column", async () => {
		const f = join(dir, "later.yaml");
		writeFileSync(
			f,
			[
				"sources:",
				"  - { name: le, type: acme, directory_url: 'https://acme.test/dir' }",
				"certificates:",
				"  - name: wild",
				"    domains: ['*.example.com']",
				"    issuer: le",
				"    key_typ: rsa-2048",
				"targets:",
				"  - { name: lb1, type: haproxy-runtime, socket: /run/haproxy/admin.sock, crt_dir: /etc/haproxy/certs, probe: 127.0.0.1 }",
				"",
			].join("\n"),
		);
		const r = await certificatee(["validate", "--config", f]);
		expect(r.code).toBe(1);
		expect(r.stdout).toContain("3 problems");
		expect(r.stdout).toMatch(
			/certificates\[0\]\.domains\[0\] \(line 5, column 15\): wildcard "\*\.example\.com" needs DNS-01/,
		);
		expect(r.stdout).toContain(
			"certificates[0].key_typ (line 7, column 5): unknown key: did you mean `key_type`?",
		);
		expect(r.stdout).toMatch(/targets\[0\]\.probe \(line 9, column \d+\): expected "host:port"/);
	});

	it("a missing password_file is one problem naming the file beside the configuration", async () => {
		const f = join(dir, "secret.yaml");
		writeFileSync(
			f,
			"targets:\n  - name: api\n    type: haproxy-dataplane\n    endpoints:\n      - { name: e, url: 'http://127.0.0.1:5555', username: admin, password_file: dpapi.secret }\n",
		);
		const r = await certificatee(["validate", "--config", f], {});
		expect(r.code).toBe(1);
		expect(r.stdout).toContain("1 problem");
		expect(r.stdout).toContain(
			`password_file (line 5, column 67): cannot read ${join(dir, "dpapi.secret")} (ENOENT)`,
		);
		expect(r.stdout).not.toContain("password:");
	});

	it("--config-only passes a bad source file as a warning, and still fails an invalid configuration", async () => {
		const certs = join(dir, "certs-config-only");
		mkdirSync(certs, { recursive: true });
		writeFileSync(join(certs, "junk.pem"), "not a certificate\n");
		const f = join(dir, "config-only.yaml");
		writeFileSync(f, "sources:\n  - { name: files, type: directory, path: ./certs-config-only }\n");
		const strict = await certificatee(["validate", "--config", f], { CERTIFICATEE_CONFIG: "" });
		expect(strict.code).toBe(1);
		const lenient = await certificatee(["validate", "--config-only", "--config", f]);
		expect(lenient.code).toBe(0);
		expect(lenient.stdout).toContain("valid");
		expect(lenient.stdout).toMatch(/warning: sources\[0\]\.path: .*junk\.pem.*\(the daemon skips it\)/);
		writeFileSync(f, "sources:\n  - { name: files, type: directory, pth: ./certs-config-only }\n");
		const invalid = await certificatee(["validate", "--config-only", "--config", f]);
		expect(invalid.code).toBe(1);
		expect(invalid.stdout).toContain("1 problem");
		expect(invalid.stdout).toContain("sources[0].pth (line 2, column 37): unknown key: did you mean `path`?");
	});

	it("a state directory this user cannot write: validate --config-only fails naming it, and run says STATE_UNWRITABLE with a hint", async () => {
		// As root, the CLI runs as nobody (root writes anywhere); otherwise as this user under a 0555 parent.
		const asRoot = process.getuid?.() === 0;
		const user = asRoot ? { uid: 65534, gid: 65534 } : {};
		const base = join(dir, "unwritable");
		mkdirSync(base, { recursive: true });
		chmodSync(dir, 0o755);
		chmodSync(base, 0o555);
		const f = join(base, "certificatee.yaml");
		writeFileSync(f, `state_dir: ${join(base, "state")}\nsources:\n  - { name: local, type: local-ca }\n`, {
			mode: 0o644,
		});
		const checked = await cli(["validate", "--config-only", "--config", f], { cwd: base, ...user });
		expect(checked.code, checked.stdout + checked.stderr).toBe(1);
		expect(checked.stdout).toContain(
			`state_dir: STATE_UNWRITABLE: state directory ${join(base, "state")} is not writable`,
		);
		expect(checked.stdout).toMatch(/hint: let uid \d+ write it/);
		const run = await cli(["sync", "--config", f], { cwd: base, ...user });
		expect(run.code).toBe(1);
		expect(run.stderr).toMatch(
			/^certificatee: STATE_UNWRITABLE: state directory .* is not writable by uid \d+: .*: EACCES\n {2}hint: /m,
		);
	});

	it("a state directory other accounts can write: validate --config-only fails with STATE_EXPOSED, as the daemon's start does", async () => {
		const base = join(dir, "exposed");
		mkdirSync(join(base, "state"), { recursive: true });
		chmodSync(join(base, "state"), 0o777);
		const f = join(base, "certificatee.yaml");
		writeFileSync(f, `state_dir: ${join(base, "state")}\nsources:\n  - { name: local, type: local-ca }\n`);
		const checked = await certificatee(["validate", "--config-only", "--config", f]);
		expect(checked.code, checked.stdout + checked.stderr).toBe(1);
		expect(checked.stdout).toContain(
			`state_dir: STATE_EXPOSED: state_dir ${join(base, "state")} is writable by every account`,
		);
		expect(checked.stdout).toContain(`chmod 700 ${join(base, "state")}`);
		const run = await certificatee(["sync", "--once", "--config", f]);
		expect(run.code).toBe(1);
		expect(run.stderr).toContain("STATE_EXPOSED");
		chmodSync(join(base, "state"), 0o700);
		expect((await certificatee(["validate", "--config-only", "--config", f])).code).toBe(0);
	});

	it("every subcommand's --help shows the global options", async () => {
		for (const args of [
			["validate", "--help"],
			["status", "--help"],
			["ca", "export", "--help"],
		]) {
			const r = await certificatee(args);
			expect(r.code, args.join(" ")).toBe(0);
			expect(r.stdout).toContain("Global Options:");
			expect(r.stdout).toContain("-c, --config <file>");
			expect(r.stdout).toContain("--json");
		}
		expect((await certificatee(["validate", "--help"])).stdout).toContain("--online");
	});
});

describe("cli/validate: trust_store", () => {
	it("names a certificate whose chain misses its intermediate, and a trust store that cannot be read", async () => {
		const root = await createTestCa("validate root");
		const intermediate = await createTestCa("validate intermediate", { issuer: root });
		const certs = mkdtempSync(join(dir, "trust-"));
		const good = await issueTestLeaf(root, { names: ["good.test"], intermediates: [intermediate] });
		const bare = await issueTestLeaf(root, { names: ["bare.test"], intermediates: [intermediate] });
		writeFileSync(join(certs, "good.pem"), good.combinedPem);
		writeFileSync(join(certs, "bare.pem"), bare.certPem + bare.keyPem);
		writeFileSync(join(dir, "roots.pem"), root.certPem);
		const f = join(dir, "trust.yaml");
		const target = (name: string, store: string) =>
			`  - { name: ${name}, type: haproxy-runtime, socket: /run/haproxy.sock, crt_dir: /etc/haproxy/certs, trust_store: ${store} }\n`;
		writeFileSync(
			f,
			`sources:\n  - { name: files, type: directory, path: ${certs} }\ntargets:\n${target("lb1", join(dir, "roots.pem"))}${target("lb2", join(dir, "absent.pem"))}`,
		);
		const r = await certificatee(["validate", "--config", f]);
		expect(r.code).toBe(1);
		expect(r.stdout).toContain("2 problems");
		expect(r.stdout).toMatch(
			/targets\[0\]\.trust_store.*certificate bare: the chain ends at CN=bare.test, issued by CN=validate intermediate/,
		);
		expect(r.stdout).toContain("sync never pushes it to target lb1");
		expect(r.stdout).toContain(`targets[1].trust_store`);
		expect(r.stdout).toContain(
			`trust store ${join(dir, "absent.pem")} cannot be used: ${join(dir, "absent.pem")}: ENOENT`,
		);
		expect(r.stdout).not.toContain("certificate good");
		// --config-only: the chain is a warning (the daemon holds it back and runs), the unreadable store is not.
		const only = await certificatee(["validate", "--config-only", "--config", f]);
		expect(only.code).toBe(1);
		expect(only.stdout).toContain("1 problem");
		expect(only.stdout).toContain("warning: targets[0].trust_store");
	});
});
