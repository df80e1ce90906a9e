/**
 * docs/cluster.md against the code: its configuration examples load (with their secret files present) into
 * what they say, and its key table names every key of the `cluster:` schema with the schema's default.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { clusterSchema, etcdSchema } from "../../src/cluster/schema.js";
import { parseConfig } from "../../src/config/load.js";

const doc = readFileSync(join(import.meta.dirname, "../../docs/cluster.md"), "utf8");
const yamlBlocks = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] as string);
const dir = mkdtempSync(join(tmpdir(), "certificatee-cluster-docs-"));

describe("docs/cluster.md", () => {
	it("the first example's cluster: block loads as written", () => {
		const example = yamlBlocks.find((b) => b.includes("cluster:") && !b.includes(`\${`)) as string;
		const { cluster } = parseConfig(parse(example), "docs/cluster.md", { env: {}, baseDir: dir }).config;
		expect(cluster).toMatchObject({
			etcd: { prefix: "certificatee/", deadline: 2000 },
			lease_ttl: 10_000,
			member: "lb-ctl-1",
			shard_endpoints: false,
			encryption_key_file: "/etc/certificatee/cluster.key",
		});
	});

	it("the three-replica configuration loads with what the unit gives it (member, state directory, credentials)", () => {
		const example = yamlBlocks.find((b) => b.includes(`\${CERTIFICATEE_MEMBER}`)) as string;
		writeFileSync(join(dir, "etcd-password"), "etcd-secret\n", { mode: 0o600 });
		writeFileSync(join(dir, "dpapi"), "dpapi-secret\n", { mode: 0o600 });
		const env = {
			CERTIFICATEE_MEMBER: "lb-ctl-2",
			STATE_DIRECTORY: join(dir, "lb-ctl-2"),
			CREDENTIALS_DIRECTORY: dir,
		};
		const text = example.replaceAll("/etc/certificatee/dpapi", join(dir, "dpapi"));
		const { config } = parseConfig(parse(text), "docs/cluster.md", { env, baseDir: dir });
		expect(config.state_dir).toBe(join(dir, "lb-ctl-2"));
		expect(config.cluster).toMatchObject({
			etcd: { username: "certificatee", password: "etcd-secret" },
			member: "lb-ctl-2",
			shard_endpoints: true,
			encryption_key_file: join(dir, "cluster.key"),
		});
		expect(config.targets.map((t) => t.name)).toEqual(["fra"]);
	});

	it("the key table names every key of the schema", () => {
		const keys = [
			...Object.keys(etcdSchema.shape).map((k) => `cluster.etcd.${k}`),
			...Object.keys(clusterSchema.shape)
				.filter((k) => k !== "etcd")
				.map((k) => `cluster.${k}`),
		];
		const rows = doc.split("\n").filter((l) => l.startsWith("| `cluster."));
		for (const key of keys) expect(rows.join("\n"), key).toContain(`\`${key}\``);
	});

	it("the defaults in the key table are the schema's", () => {
		const defaults = clusterSchema.parse({ etcd: { endpoints: ["https://etcd-1:2379"] } });
		const row = (key: string) => doc.split("\n").find((l) => l.startsWith(`| \`${key}\``)) ?? "";
		expect(row("cluster.etcd.prefix")).toContain(`\`${defaults.etcd.prefix}\``);
		expect(defaults.etcd.deadline).toBe(2000);
		expect(row("cluster.etcd.deadline")).toContain("`2s`");
		expect(defaults.lease_ttl).toBe(10_000);
		expect(row("cluster.lease_ttl")).toContain("`10s`");
		expect(row("cluster.shard_endpoints")).toContain(`\`${defaults.shard_endpoints}\``);
	});
});
