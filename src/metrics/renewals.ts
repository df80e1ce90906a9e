/** Renewal: when each certificate is next due, its retry interval and breaker, forced orders, and orders placed. */
import { Counter, type Registry } from "prom-client";
import type { CycleReport } from "../reconcile/report.js";
import { scrapeGauges, seconds } from "./last-cycle.js";

export interface RenewalView {
	certificate: string;
	nextRenewal?: Date;
	/** The longest wait between two attempts after failures, for its lifetime (renewal/policy.ts). */
	retryIntervalMs?: number;
	breakerOpen: boolean;
	/** Orders forced by an operator (`certificatee renew --force`, `revoke`), kept in the renewal state. */
	forcedRenewals?: number;
}

export interface RenewalMetrics {
	recordCycle(report: CycleReport): void;
	recordRenewals(renewals: readonly RenewalView[]): void;
	recordAcmeOrder(issuer: string, result: "success" | "failure"): void;
}

export function registerRenewalMetrics(registry: Registry): RenewalMetrics {
	const gauge = scrapeGauges(registry);
	let renewals: readonly RenewalView[] = [];
	gauge(
		"certificatee_renewal_next_timestamp_seconds",
		"When each issued certificate is next due for renewal.",
		["certificate"],
		(g) => {
			for (const r of renewals)
				if (r.nextRenewal) g.set({ certificate: r.certificate }, seconds(r.nextRenewal));
		},
	);
	gauge(
		"certificatee_renewal_retry_interval_seconds",
		"The longest wait between two renewal attempts after failures: 1 h, or 1/100 of a shorter lifetime.",
		["certificate"],
		(g) => {
			for (const r of renewals)
				if (r.retryIntervalMs !== undefined) g.set({ certificate: r.certificate }, r.retryIntervalMs / 1000);
		},
	);
	gauge(
		"certificatee_renewal_loop_breaker_open",
		"1 when the renewal loop breaker stopped ordering for the certificate.",
		["certificate"],
		(g) => {
			for (const r of renewals) g.set({ certificate: r.certificate }, r.breakerOpen ? 1 : 0);
		},
	);
	// A gauge fed from persisted state, so the total survives restarts (the CLI forces, the daemon reports).
	gauge(
		"certificatee_forced_renewals_total",
		"Orders an operator forced (renew --force, revoke), clearing backoff and the daily cap.",
		["certificate"],
		(g) => {
			for (const r of renewals) g.set({ certificate: r.certificate }, r.forcedRenewals ?? 0);
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
		recordRenewals(views) {
			renewals = views;
		},
		recordAcmeOrder(issuer, result) {
			acmeOrders.inc({ issuer, result });
		},
	};
}
