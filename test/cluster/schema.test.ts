import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defaultMemberName, etcdSettings } from "../../src/cluster/schema.js";
import { configProblems, loadConfigFile, parseConfig } from "../../src/config/load.js";
import { CertificateeError } from "../../src/errors.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-cluster-config-"));

function problemsOf(raw: unknown): Array<{ path: string; message: string }> {
	try {
		parseConfig(raw, "bad.yaml", { env: {}, baseDir: dir });
	} catch (e) {
		expect(e).toBeInstanceOf(CertificateeError);
		return configProblems(e as CertificateeError);
	}
	throw new Error("expected a configuration error");
}

const minimal = { etcd: { endpoints: ["https://etcd-1:2379"] } };

describe("cluster/schema", () => {
	it("without cluster: there is none", () => {
		expect(parseConfig({}, "x.yaml", { env: {} }).config.cluster).toBeUndefined();
	});

	it("fills the defaults", () => {
		const { cluster } = parseConfig({ cluster: minimal }, "x.yaml", { env: {} }).config;
		expect(cluster).toEqual({
			etcd: { endpoints: ["https://etcd-1:2379"], prefix: "certificatee/", deadline: 2000 },
			lease_ttl: 10_000,
			member: defaultMemberName(),
			shard_endpoints: false,
		});
		expect(defaultMemberName()).toMatch(new RegExp(`-${process.pid}$`));
	});

	it("reads the documented example from YAML, with password_file, an environment variable and paths relative to the file", () => {
		writeFileSync(join(dir, "etcd-password"), "from-file\n", { mode: 0o600 });
		const file = join(dir, "cluster.yaml");
		writeFileSync(
			file,
			`cluster:
  etcd:
    endpoints: [https://etcd-1:2379, https://etcd-2:2379, https://etcd-3:2379]
    prefix: certificatee/prod/
    ca_file: tls/ca.pem
    cert_file: tls/client.pem
    key_file: /etc/certificatee/tls/client.key
    username: "\${ETCD_USER}"
    password_file: etcd-password
    deadline: 1500ms
  lease_ttl: 5s
  member: lb-ctl-1
  shard_endpoints: true
  encryption_key_file: cluster.key
`,
		);
		const { cluster } = loadConfigFile(file, { ETCD_USER: "certificatee" }).config;
		const connection = {
			endpoints: ["https://etcd-1:2379", "https://etcd-2:2379", "https://etcd-3:2379"],
			prefix: "certificatee/prod/",
			ca_file: join(dir, "tls/ca.pem"),
			cert_file: join(dir, "tls/client.pem"),
			key_file: "/etc/certificatee/tls/client.key",
			username: "certificatee",
			password: "from-file",
		};
		expect(cluster).toEqual({
			etcd: { ...connection, deadline: 1500 },
			lease_ttl: 5000,
			member: "lb-ctl-1",
			shard_endpoints: true,
			encryption_key_file: join(dir, "cluster.key"),
		});
		expect(etcdSettings(cluster!)).toEqual({ ...connection, deadline_ms: 1500 });
	});

	it.each<[string, unknown, string, RegExp]>([
		["no etcd", {}, "cluster.etcd", /required/],
		["no endpoints", { etcd: {} }, "cluster.etcd.endpoints", /required/],
		["empty endpoints", { etcd: { endpoints: [] } }, "cluster.etcd.endpoints", /./],
		[
			"an endpoint that is no URL",
			{ etcd: { endpoints: ["etcd-1:2379"] } },
			"cluster.etcd.endpoints[0]",
			/http\(s\) URL/,
		],
		[
			"a prefix without its slash",
			{ etcd: { ...minimal.etcd, prefix: "certificatee" } },
			"cluster.etcd.prefix",
			/ending in "\/"/,
		],
		["a bad deadline", { etcd: { ...minimal.etcd, deadline: "2 s" } }, "cluster.etcd.deadline", /duration/],
		[
			"a cert without its key",
			{ etcd: { ...minimal.etcd, cert_file: "/c.pem" } },
			"cluster.etcd.key_file",
			/both cert_file and key_file/,
		],
		[
			"a username without password",
			{ etcd: { ...minimal.etcd, username: "u" } },
			"cluster.etcd.password",
			/both username and password/,
		],
		["a short lease", { ...minimal, lease_ttl: "1s" }, "cluster.lease_ttl", /at least 2s/],
		["a lease in part seconds", { ...minimal, lease_ttl: "2500ms" }, "cluster.lease_ttl", /whole seconds/],
		["a member name with a slash", { ...minimal, member: "lb/1" }, "cluster.member", /letters, digits/],
		[
			"a misspelt key",
			{ ...minimal, shard_endpoint: true },
			"cluster.shard_endpoint",
			/did you mean `shard_endpoints`/,
		],
		[
			"a misspelt etcd key",
			{ etcd: { ...minimal.etcd, endpoint: "x" } },
			"cluster.etcd.endpoint",
			/did you mean `endpoints`/,
		],
	])("%s is named at its path", (_what, cluster, path, message) => {
		const problems = problemsOf({ cluster });
		const problem = problems.find((p) => p.path === path);
		expect(problem, JSON.stringify(problems)).toBeDefined();
		expect(problem?.message).toMatch(message);
	});

	it("an unreadable password_file is named, never the missing password after it", () => {
		const problems = problemsOf({
			cluster: { etcd: { ...minimal.etcd, username: "u", password_file: join(dir, "missing") } },
		});
		expect(problems.map((p) => p.path)).toEqual(["cluster.etcd.password_file"]);
		expect(problems[0]?.message).toContain("cannot read");
	});
});
