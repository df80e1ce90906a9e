/**
 * Prometheus metrics. Gauges describing state are computed at scrape time from the last cycle report
 * (so a removed certificate's series disappear); counters accumulate per cycle. Labels never carry key
 * material or serials (bounded cardinality).
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import {
	type CycleReport,
	certificateOnEndpoint,
	cycleOutcome,
	type EndpointReport,
	endpointFailures,
} from "../reconcile/report.js";
import { type ClusterView, registerClusterMetrics } from "./cluster.js";
import { refsAfterCycle } from "./refs.js";
import { type StatusSummary, statusSummary } from "./status-view.js";

export interface RenewalView {
	certificate: string;
	nextRenewal?: Date;
	/** The longest wait between two attempts after failures, for its lifetime (renewal/policy.ts). */
	retryIntervalMs?: number;
	breakerOpen: boolean;
	/** Orders forced by an operator (`certificatee renew --force`, `revoke`), kept in the renewal state. */
	forcedRenewals?: number;
}

export interface Metrics {
	registry: Registry;
	/** Records a finished cycle. */
	recordCycle(report: CycleReport): void;
	recordRenewals(renewals: readonly RenewalView[]): void;
	recordAcmeOrder(issuer: string, result: "success" | "failure"): void;
	/** The configured interval (the daemon sets it at start and on reload), for the liveness alert. */
	recordInterval(ms: number): void;
	lastReport(): CycleReport | undefined;
	/** In a cluster: where the cluster gauges read from (docs/cluster.md); called once at start. */
	recordCluster(view: () => ClusterView | undefined): void;
}

const ENDPOINT_STATES = ["converged", "pending", "failed", "unobserved"] as const;

const seconds = (iso: string | Date) => new Date(iso).getTime() / 1000;

export function createMetrics(): Metrics {
	const registry = new Registry();
	let last: CycleReport | undefined;
	let renewals: readonly RenewalView[] = [];
	let intervalSeconds: number | undefined;
	let clusterView: (() => ClusterView | undefined) | undefined;
	const lastSuccess = new Map<string, number>();
	const key = (e: EndpointReport) => `${e.target}\u0000${e.endpoint}`;

	const gauge = (name: string, help: string, labelNames: string[], collect: (g: Gauge) => void) =>
		new Gauge({
			name,
			help,
			labelNames,
			registers: [registry],
			collect() {
				this.reset();
				collect(this);
			},
		});
	const endpoints = () => (last?.targets ?? []).flatMap((t) => t.endpoints);
	// The verdicts status, /status.json and the fleet page show: the same summary, built once per cycle.
	let summarised: { report: CycleReport; summary: StatusSummary } | undefined;
	const summary = (): StatusSummary | undefined => {
		if (last === undefined) return undefined;
		if (summarised?.report !== last) summarised = { report: last, summary: statusSummary(last) };
		return summarised.summary;
	};

	gauge(
		"certificatee_endpoint_state",
		"1 for the endpoint's state after the last cycle (converged, pending, failed, unobserved), 0 for the others: the state status and the fleet page show.",
		["target", "endpoint", "state"],
		(g) => {
			for (const e of summary()?.endpoints ?? [])
				for (const state of ENDPOINT_STATES)
					g.set({ target: e.target, endpoint: e.endpoint, state }, e.state === state ? 1 : 0);
		},
	);
	gauge(
		"certificatee_certificate_endpoints",
		"Endpoints of the target that carry the certificate (status's converged/total: the total).",
		["certificate", "target"],
		(g) => {
			for (const c of summary()?.certificates ?? [])
				for (const t of c.targets) g.set({ certificate: c.name, target: t.target }, t.total);
		},
	);
	gauge(
		"certificatee_certificate_endpoints_converged",
		"Endpoints of the target on which the certificate is converged (status's converged/total: converged).",
		["certificate", "target"],
		(g) => {
			for (const c of summary()?.certificates ?? [])
				for (const t of c.targets) g.set({ certificate: c.name, target: t.target }, t.converged);
		},
	);
	gauge(
		"certificatee_cycle_converged",
		"1 when the last cycle converged (what `sync --once` would exit 0 for): nothing failed, nothing pending.",
		[],
		(g) => {
			if (last !== undefined) g.set(cycleOutcome(last).converged ? 1 : 0);
		},
	);

	gauge(
		"certificatee_certificate_not_after_timestamp_seconds",
		"Expiry of each desired certificate.",
		["certificate"],
		(g) => {
			for (const c of last?.certificates ?? []) g.set({ certificate: c.name }, seconds(c.notAfter));
		},
	);
	gauge(
		"certificatee_certificate_lifetime_seconds",
		"Lifetime (notAfter - notBefore) of each desired certificate; the expiry alerts scale with it.",
		["certificate"],
		(g) => {
			for (const c of last?.certificates ?? [])
				g.set({ certificate: c.name }, seconds(c.notAfter) - seconds(c.notBefore));
		},
	);
	gauge(
		"certificatee_ref_not_after_timestamp_seconds",
		"Expiry of every ref an endpoint holds after the cycle's writes, unmanaged ones included.",
		["target", "endpoint", "ref", "class"],
		(g) => {
			for (const e of endpoints())
				for (const r of refsAfterCycle(e, last?.certificates ?? []))
					g.set({ target: e.target, endpoint: e.endpoint, ref: r.ref, class: r.class }, seconds(r.notAfter));
		},
	);
	gauge(
		"certificatee_ref_in_sync",
		"1 when the certificate's canonical ref holds the desired certificate in storage and runtime.",
		["target", "endpoint", "certificate"],
		(g) => {
			for (const e of endpoints()) {
				if (!e.ok) continue;
				for (const v of e.verdicts) {
					if (!("certificate" in v) || v.certificate === undefined || !("ref" in v)) continue;
					const c = certificateOnEndpoint(e, v.certificate);
					if (c === undefined) continue;
					g.set({ target: e.target, endpoint: e.endpoint, certificate: v.certificate }, c.refInSync ? 1 : 0);
				}
			}
		},
	);
	gauge(
		"certificatee_served_serial_match",
		"1 when a TLS probe by SNI sees the desired certificate's serial.",
		["target", "endpoint", "sni"],
		(g) => {
			for (const e of endpoints()) {
				// One name can have a certificate per key type (RSA and ECDSA): 1 only when every one is served.
				const match = new Map<string, boolean>();
				for (const s of e.served) match.set(s.sni, (match.get(s.sni) ?? true) && s.match);
				for (const [sni, ok] of match) g.set({ target: e.target, endpoint: e.endpoint, sni }, ok ? 1 : 0);
			}
		},
	);
	gauge(
		"certificatee_shadowed_names",
		"1 per SNI name HAProxy serves (or, planned, will serve) from another ref than the desired certificate's; served_by names the culprit.",
		["target", "endpoint", "sni", "certificate", "served_by"],
		(g) => {
			for (const e of endpoints())
				for (const v of e.verdicts)
					if (v.class === "shadowed")
						g.set(
							{
								target: e.target,
								endpoint: e.endpoint,
								sni: v.sni,
								certificate: v.certificate,
								served_by: v.servedBy ?? "unknown",
							},
							1,
						);
		},
	);
	gauge(
		"certificatee_chain_untrusted",
		"1 per certificate whose chain does not verify against the target's trust_store (CHAIN_UNTRUSTED, CHAIN_BROKEN, CHAIN_EXPIRED in code): never pushed to that target.",
		["target", "certificate", "code"],
		(g) => {
			for (const e of endpoints())
				for (const h of e.held ?? [])
					if (h.kind === "trust") g.set({ target: e.target, certificate: h.certificate, code: h.code }, 1);
		},
	);
	gauge(
		"certificatee_rollout_stage",
		"1 for the stage each certificate's rollout is in (canary, hold, rest, halted), 0 for the others.",
		["certificate", "stage"],
		(g) => {
			for (const r of last?.rollouts ?? [])
				for (const stage of ["canary", "hold", "rest", "halted"])
					g.set({ certificate: r.certificate, stage }, r.stage === stage ? 1 : 0);
		},
	);
	gauge(
		"certificatee_rollout_halted",
		"1 per halted rollout: the canary and the check that failed, with its code.",
		["certificate", "endpoint", "check", "code"],
		(g) => {
			for (const r of last?.rollouts ?? [])
				if (r.stage === "halted" && r.failure)
					g.set(
						{
							certificate: r.certificate,
							endpoint: r.failure.endpoint,
							check: r.failure.check,
							code: r.failure.code,
						},
						1,
					);
		},
	);
	gauge(
		"certificatee_endpoint_up",
		"1 when the endpoint answered the last observation.",
		["target", "endpoint"],
		(g) => {
			for (const e of endpoints()) g.set({ target: e.target, endpoint: e.endpoint }, e.ok ? 1 : 0);
		},
	);
	gauge(
		"certificatee_endpoint_last_success_timestamp_seconds",
		"When the endpoint last completed a cycle without failure.",
		["target", "endpoint"],
		(g) => {
			for (const e of endpoints()) {
				const t = lastSuccess.get(key(e));
				if (t !== undefined) g.set({ target: e.target, endpoint: e.endpoint }, t);
			}
		},
	);
	gauge(
		"certificatee_legacy_duplicates",
		"Legacy duplicates by state: found, deleted (this cycle), pending_reload, pinned, ambiguous.",
		["target", "endpoint", "state"],
		(g) => {
			for (const e of endpoints()) {
				if (!e.ok) continue;
				const count = (cls: string) => e.verdicts.filter((v) => v.class === cls).length;
				const deleted = new Set(
					e.steps
						.filter((s) => (s.op === "storage-delete" || s.op === "runtime-delete") && s.result === "ok")
						.map((s) => s.ref),
				).size;
				const labels = { target: e.target, endpoint: e.endpoint };
				g.set(
					{ ...labels, state: "found" },
					count("legacy-duplicate") + count("deleted-pending-reload") + count("pinned"),
				);
				g.set({ ...labels, state: "deleted" }, deleted);
				g.set({ ...labels, state: "pending_reload" }, count("deleted-pending-reload"));
				g.set({ ...labels, state: "pinned" }, count("pinned"));
				g.set({ ...labels, state: "ambiguous" }, count("ambiguous"));
				g.set({ ...labels, state: "unaddressable" }, count("unaddressable"));
			}
		},
	);
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

	gauge(
		"certificatee_source_problems",
		"Source files and stored certificates the last cycle could not use (failed orders are counted apart).",
		[],
		(g) => {
			if (last !== undefined) g.set(last.sourceProblems.length);
		},
	);

	gauge(
		"certificatee_certificate_source_problems",
		"Files of the certificate's name its source could not use (invalid, or expiring before the one served): the certificate served is the last valid one.",
		["certificate"],
		(g) => {
			for (const c of summary()?.certificates ?? []) g.set({ certificate: c.name }, c.problems?.length ?? 0);
		},
	);

	gauge(
		"certificatee_cycle_last_finished_timestamp_seconds",
		"When the last cycle finished; with certificatee_cycle_interval_seconds, the liveness /healthz reports.",
		[],
		(g) => {
			if (last !== undefined) g.set(seconds(last.startedAt) + last.durationMs / 1000);
		},
	);
	gauge("certificatee_cycle_interval_seconds", "The configured interval between cycles.", [], (g) => {
		if (intervalSeconds !== undefined) g.set(intervalSeconds);
	});
	gauge(
		"certificatee_target_observed",
		"1 when the last cycle observed at least one endpoint of the target (what /readyz requires of every target).",
		["target"],
		(g) => {
			if (last === undefined) return;
			const unobserved = new Set(cycleOutcome(last).unobservedTargets);
			for (const t of last.targets) g.set({ target: t.target }, unobserved.has(t.target) ? 0 : 1);
		},
	);

	gauge(
		"certificatee_reload_budget_remaining",
		"Reloads certificatee may still do on the endpoint in the sliding hour (reloads.max_per_hour minus those done).",
		["target", "endpoint"],
		(g) => {
			for (const e of endpoints())
				if (e.reloads) g.set({ target: e.target, endpoint: e.endpoint }, e.reloads.budget.remaining);
		},
	);
	gauge(
		"certificatee_reload_breaker_open",
		"1 while a failed reload (or one after which the node did not serve what was written) stops writes to the endpoint.",
		["target", "endpoint"],
		(g) => {
			for (const e of endpoints())
				if (e.reloads) g.set({ target: e.target, endpoint: e.endpoint }, e.reloads.breaker ? 1 : 0);
		},
	);
	const reloadsDone = new Counter({
		name: "certificatee_reloads_total",
		help: "Reloads certificatee did on purpose (reloads.max_per_hour), by reason and result (ok, failed, not_served).",
		labelNames: ["target", "endpoint", "reason", "result"],
		registers: [registry],
	});
	const operations = new Counter({
		name: "certificatee_sync_operations_total",
		help: "Writes made on endpoints, by operation and result.",
		labelNames: ["target", "endpoint", "operation", "result"],
		registers: [registry],
	});
	const reloads = new Counter({
		name: "certificatee_reloads_caused_total",
		help: "Reloads an endpoint scheduled in answer to certificatee's writes (expected to stay 0).",
		labelNames: ["target", "endpoint", "reason"],
		registers: [registry],
	});
	const cycleDuration = new Histogram({
		name: "certificatee_cycle_duration_seconds",
		help: "Duration of whole cycles.",
		labelNames: ["mode"],
		buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
		registers: [registry],
	});
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
		registry,
		lastReport: () => last,
		recordCycle(report) {
			last = report;
			cycleDuration.observe({ mode: report.mode }, report.durationMs / 1000);
			for (const r of report.renewals ?? []) {
				if (r.order?.result === "failed") {
					orderFailures.inc({ certificate: r.certificate, code: r.lastError?.code ?? "ISSUE_FAILED" });
				}
			}
			for (const e of report.targets.flatMap((t) => t.endpoints)) {
				const labels = { target: e.target, endpoint: e.endpoint };
				for (const s of e.steps) {
					if (s.result === undefined || s.result === "skipped") continue;
					operations.inc({ ...labels, operation: s.op, result: s.result });
					if (s.reloadCaused) reloads.inc({ ...labels, reason: s.op });
				}
				const cycle = e.reloads?.cycle;
				if (cycle?.decision === "reloaded" && cycle.result) {
					const result = cycle.result === "not-served" ? "not_served" : cycle.result;
					for (const reason of cycle.reasons) reloadsDone.inc({ ...labels, reason, result });
				}
				// The endpoint answered and took every write (a refused update or a probe mismatch is no failure of it).
				if (endpointFailures(e).every((f) => f.kind !== "endpoint" && f.kind !== "write")) {
					lastSuccess.set(key(e), Date.parse(report.startedAt) / 1000 + report.durationMs / 1000);
				}
			}
		},
		recordRenewals(views) {
			renewals = views;
		},
		recordInterval(ms) {
			intervalSeconds = ms / 1000;
		},
		recordCluster(view) {
			if (clusterView) {
				clusterView = view;
				return;
			}
			clusterView = view;
			registerClusterMetrics(registry, () => clusterView?.());
		},
		recordAcmeOrder(issuer, result) {
			acmeOrders.inc({ issuer, result });
		},
	};
}
