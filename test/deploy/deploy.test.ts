import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createMetrics } from "../../src/metrics/index.js";

const root = join(import.meta.dirname, "../..");
const known = new Set(
	createMetrics()
		.registry.getMetricsAsArray()
		.flatMap((m) =>
			String(m.type) === "histogram"
				? [m.name, `${m.name}_bucket`, `${m.name}_count`, `${m.name}_sum`]
				: [m.name],
		),
);
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

	it("the systemd unit is hardened and runs as its own user", () => {
		const unit = readFileSync(join(root, "deploy/systemd/certificatee.service"), "utf8");
		for (const line of [
			"User=certificatee",
			"ProtectSystem=strict",
			"NoNewPrivileges=yes",
			"ReadWritePaths=",
			"ExecReload=/bin/kill -HUP $MAINPID",
		]) {
			expect(unit).toContain(line);
		}
	});
});
