/** Renewal: when each certificate is next due, its retry interval and breaker, forced orders, and orders placed. */
import { Counter, type Registry } from "prom-client";
import type { CycleReport } from "../reconcile/report.js";
import type { RenewalStatus } from "../renewal/status.js";
import { scrapeGauges, seconds } from "./last-cycle.js";

export interface RenewalMetrics {
	recordCycle(report: CycleReport): void;
	recordRenewals(statuses: readonly RenewalStatus[]): void;
	recordAcmeOrder(issuer: string, result: "success" | "failure"): void;
}

export function registerRenewalMetrics(registry: Registry): RenewalMetrics {
	const gauge = scrapeGauges(registry);
	let renewals: readonly RenewalStatus[] = [];
	gauge(
		"certificatee_renewal_next_timestamp_seconds",
		"When each issued certificate is next due for renewal.",
		["certificate"],
		(g) => {
			for (const r of renewals) g.set({ certificate: r.name }, seconds(new Date(r.nextRenewalAt)));
		},
	);
	gauge(
		"certificatee_renewal_retry_interval_seconds",
		"The longest wait between two renewal attempts after failures: 1 h, or 1/100 of a shorter lifetime.",
		["certificate"],
		(g) => {
			for (const r of renewals) g.set({ certificate: r.name }, r.retryIntervalMs / 1000);
		},
	);
	gauge(
		"certificatee_renewal_loop_breaker_open",
		"1 when the renewal loop breaker stopped ordering for the certificate.",
		["certificate"],
		(g) => {
			for (const r of renewals) g.set({ certificate: r.name }, r.breakerOpen ? 1 : 0);
		},
	);
	// A gauge fed from persisted state, so the total survives restarts (the CLI forces, the daemon reports).
	gauge(
		"certificatee_forced_renewals_total",
		"Orders an operator forced (renew --force, revoke), clearing backoff and the daily cap.",
		["certificate"],
		(g) => {
			for (const r of renewals) g.set({ certificate: r.name }, r.forcedRenewals);
		},
	);
	const orderFailures = new Counter({
		name: "certificatee_order_failures_total",
		help: "Failed certificate orders, by certificate and error code.",
		labelNames: ["certificate", "code"],
		registers: [registry],
	});
	const acmeOrders = new Counter({
		name: "certificatee_acme_orders_total",
		help: "Certificate orders placed with ACME issuers, by result.",
		labelNames: ["issuer", "result"],
		registers: [registry],
	});
	return {
		recordCycle(report) {
			for (const r of report.renewals ?? [])
				if (r.order?.result === "failed")
					orderFailures.inc({ certificate: r.certificate, code: r.lastError?.code ?? "ISSUE_FAILED" });
		},
		recordRenewals(statuses) {
			renewals = statuses;
		},
		recordAcmeOrder(issuer, result) {
			acmeOrders.inc({ issuer, result });
		},
	};
}
