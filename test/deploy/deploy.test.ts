import { execFile } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { LISTEN_ENV } from "../../src/config/load.js";
import { createMetrics } from "../../src/metrics/index.js";
import { registerDaemonMetrics } from "../../src/metrics/process.js";

const root = join(import.meta.dirname, "../..");
// The cluster metrics are registered only in cluster mode (docs/cluster.md): ask for them as a member does.
const metrics = createMetrics();
metrics.recordCluster(() => undefined);
// And those only the daemon registers (process, build info, configuration reloads).
registerDaemonMetrics(metrics.registry, () => ({ intervalMs: 60_000, startedAt: 0, configLoaded: true }));
const known = new Set(
	metrics.registry
		.getMetricsAsArray()
		.flatMap((m) =>
			String(m.type) === "histogram"
				? [m.name, `${m.name}_bucket`, `${m.name}_count`, `${m.name}_sum`]
				: [m.name],
		),
);
/** The single process's unit, and the template of a cluster member (docs/cluster.md). */
const UNITS = ["certificatee.service", "certificatee@.service"];
const metricNames = (expr: string) => [...expr.matchAll(/\bcertificatee_[a-z_]+/g)].map((m) => m[0]);

describe("deploy kit", () => {
	it("alert rules parse and only use metrics certificatee exports", () => {
		const rules = parse(readFileSync(join(root, "deploy/prometheus/alerts.yaml"), "utf8")) as {
			groups: Array<{ rules: Array<{ alert: string; expr: string }> }>;
		};
		const all = rules.groups.flatMap((g) => g.rules);
		expect(all.map((r) => r.alert)).toEqual(
			expect.arrayContaining([
				"CertificateExpiringSoon",
				"CertificateeEndpointDown",
				"CertificateeRefOutOfSync",
				"CertificateeReloadCaused",
				"CertificateeRenewalLoopBreakerOpen",
				"CertificateeDown",
				"CertificateeNotReady",
				"CertificateeSourceProblems",
				"CertificateeOrderFailing",
				"CertificateeClusterNoLeader",
				"CertificateeClusterSplitLeaders",
				"CertificateeClusterMemberMissing",
				"CertificateeClusterLeaseLost",
				"CertificateeClusterWatchLagging",
				"CertificateeClusterFencedWrites",
			]),
		);
		for (const r of all) for (const m of metricNames(r.expr)) expect(known, `${r.alert}: ${m}`).toContain(m);
	});

	it("the Grafana dashboard parses and only uses metrics certificatee exports", () => {
		const dash = JSON.parse(
			readFileSync(join(root, "deploy/grafana/certificatee-dashboard.json"), "utf8"),
		) as {
			panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
		};
		expect(dash.panels.length).toBeGreaterThan(5);
		for (const p of dash.panels)
			for (const t of p.targets)
				for (const m of metricNames(t.expr)) expect(known, `${p.title}: ${m}`).toContain(m);
	});

	it.each(UNITS)("the systemd unit %s is hardened and runs as its own user", (file) => {
		const unit = readFileSync(join(root, "deploy/systemd", file), "utf8");
		for (const line of [
			"User=certificatee",
			"ProtectSystem=strict",
			"NoNewPrivileges=yes",
			// No core dump of a process holding private keys (issue 25, finding 12).
			"LimitCORE=0",
			"ReadWritePaths=",
			"ExecReload=/bin/kill -HUP $MAINPID",
		]) {
			expect(unit).toContain(line);
		}
	});

	it.each(UNITS)(
		"the unit %s tolerates missing paths, and its ExecStartPre validates the configuration only",
		(file) => {
			const unit = readFileSync(join(root, "deploy/systemd", file), "utf8");
			const paths = (key: string) =>
				unit
					.split("\n")
					.filter((l) => l.startsWith(`${key}=`))
					.flatMap((l) => l.slice(key.length + 1).split(/\s+/));
			// The state directory is created by StateDirectory=; any other path may be missing on a given host.
			const state = `/var/lib/${paths("StateDirectory")[0]}`;
			expect(paths("ReadWritePaths")).toContain(state);
			for (const p of [...paths("ReadWritePaths"), ...paths("ReadOnlyPaths")].filter((p) => p !== state))
				expect(
					p,
					`${p} needs a leading "-" or the unit fails with 226/NAMESPACE where it is missing`,
				).toMatch(/^-\//);
			expect(paths("ReadWritePaths")).toContain("-/run/haproxy");
			expect(unit).toMatch(/^ExecStartPre=\/usr\/bin\/certificatee validate --config-only$/m);
		},
	);

	it.each(UNITS)(
		"the unit %s can write every path of the documented runtime target, and reach its documented stats socket",
		(file) => {
			const unit = readFileSync(join(root, "deploy/systemd", file), "utf8");
			const writable = unit
				.split("\n")
				.filter((l) => l.startsWith("ReadWritePaths="))
				.flatMap((l) => l.slice("ReadWritePaths=".length).split(/\s+/))
				.map((p) => p.replace(/^-/, ""));
			const doc = readFileSync(join(root, "docs/haproxy-runtime-target.md"), "utf8");
			const example = parse(/```yaml\n([\s\S]*?)```/.exec(doc)?.[1] ?? "") as {
				targets: Array<{ socket: string; crt_dir: string; crt_list?: string }>;
			};
			const target = example.targets[0];
			expect(target?.crt_list).toBeDefined();
			// crt_dir is written into; the crt-list file is replaced through a temporary file in its directory.
			for (const dir of [
				target?.crt_dir ?? "",
				dirname(target?.crt_list ?? ""),
				dirname(target?.socket ?? ""),
			])
				expect(writable, `${dir} is not in ReadWritePaths`).toContain(dir);
			// The unit's user reaches the socket through its supplementary group, so the socket must be group-writable.
			const group = /^SupplementaryGroups=(\S+)$/m.exec(unit)?.[1];
			const socketLine = /^\s*stats socket \S+ .*$/m.exec(doc)?.[0] ?? "";
			expect(socketLine).toMatch(/\bmode 6[67]0\b/);
			expect(socketLine).toContain(`group ${group}`);
		},
	);

	const systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].find((p) => existsSync(p));
	it.skipIf(systemdAnalyze === undefined).each(UNITS)(
		"systemd-analyze verify accepts the unit %s without a warning",
		async (file) => {
			// verify checks that ExecStart's binary exists: point it at a stand-in.
			const dir = mkdtempSync(join(tmpdir(), "certificatee-unit-"));
			const bin = join(dir, "certificatee");
			writeFileSync(bin, "#!/bin/sh\n");
			chmodSync(bin, 0o755);
			writeFileSync(
				join(dir, file),
				readFileSync(join(root, "deploy/systemd", file), "utf8").replaceAll("/usr/bin/certificatee", bin),
			);
			// A template is verified as one of its instances (its %i resolved).
			const unit = join(dir, file.replace("@.", "@lb-ctl-1."));
			const r = await promisify(execFile)(systemdAnalyze as string, ["verify", unit]).catch(
				(e: { stdout: string; stderr: string; code: number }) => e,
			);
			// Unknown keys and bad values are only warnings (exit 0): any output is a failure.
			expect(`${r.stdout}${r.stderr}`).toBe("");
			expect("code" in r ? r.code : 0).toBe(0);
		},
	);

	it("the cluster unit names the member by its instance, keeps a state directory per member and hands over the key as a credential", () => {
		const unit = readFileSync(join(root, "deploy/systemd/certificatee@.service"), "utf8");
		expect(unit).toMatch(/^Environment=CERTIFICATEE_MEMBER=%i$/m);
		expect(unit).toMatch(/^StateDirectory=certificatee\/%i$/m);
		expect(unit).toMatch(/^LoadCredential=cluster\.key:\/etc\/certificatee\/cluster\.key$/m);
		// docs/cluster.md's configuration refers to exactly these variables.
		const doc = readFileSync(join(root, "docs/cluster.md"), "utf8");
		for (const v of ["STATE_DIRECTORY", "CERTIFICATEE_MEMBER", "CREDENTIALS_DIRECTORY"])
			expect(doc).toContain(`\${${v}}`);
	});

	it("the container image listens on every interface by default, through the variable the loader reads", () => {
		const containerfile = readFileSync(join(root, "deploy/container/Containerfile"), "utf8");
		expect(containerfile).toContain(`ENV ${LISTEN_ENV}=0.0.0.0:9810`);
		// The health check asks where the daemon listens (the file's listen wins), not a fixed port.
		expect(containerfile).toMatch(
			/^HEALTHCHECK .*CMD \["node", "\/app\/dist\/cli\/main\.js", .*"health"\]$/m,
		);
		expect(containerfile).not.toMatch(/^HEALTHCHECK .*9810/m);
		expect(containerfile).toMatch(/^EXPOSE 9810$/m);
	});
});
