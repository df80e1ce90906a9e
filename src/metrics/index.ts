/**
 * Prometheus metrics. Gauges describing state are computed at scrape time from the last cycle report
 * (so a removed certificate's series disappear); counters accumulate per cycle. Labels never carry key
 * material or serials (bounded cardinality). One module per family; this one puts them on one registry.
 */
import { Registry } from "prom-client";
import type { CycleReport } from "../reconcile/report.js";
import type { RenewalStatus } from "../renewal/status.js";
import { registerCertificateMetrics } from "./certificates.js";
import { type ClusterView, registerClusterMetrics } from "./cluster.js";
import { registerCycleMetrics } from "./cycles.js";
import { registerEndpointMetrics } from "./endpoints.js";
import { registerFleetStateMetrics } from "./fleet-state.js";
import { lastCycle } from "./last-cycle.js";
import { registerReloadMetrics } from "./reloads.js";
import { registerRenewalMetrics } from "./renewals.js";
import { registerRolloutMetrics } from "./rollouts.js";

export interface Metrics {
	registry: Registry;
	/** Records a finished cycle. */
	recordCycle(report: CycleReport): void;
	recordRenewals(renewals: readonly RenewalStatus[]): void;
	recordAcmeOrder(issuer: string, result: "success" | "failure"): void;
	/** The configured interval (the daemon sets it at start and on reload), for the liveness alert. */
	recordInterval(ms: number): void;
	lastReport(): CycleReport | undefined;
	/** In a cluster: where the cluster gauges read from (docs/cluster.md); called once at start. */
	recordCluster(view: () => ClusterView | undefined): void;
}

export function createMetrics(): Metrics {
	const registry = new Registry();
	const cycle = lastCycle();
	registerFleetStateMetrics(registry, cycle);
	registerCertificateMetrics(registry, cycle);
	registerRolloutMetrics(registry, cycle);
	const endpoints = registerEndpointMetrics(registry, cycle);
	const renewals = registerRenewalMetrics(registry);
	const cycles = registerCycleMetrics(registry, cycle);
	const reloads = registerReloadMetrics(registry, cycle);
	let clusterView: (() => ClusterView | undefined) | undefined;
	return {
		registry,
		lastReport: () => cycle.report(),
		recordCycle(report) {
			cycle.set(report);
			for (const family of [cycles, renewals, endpoints, reloads]) family.recordCycle(report);
		},
		recordRenewals: (statuses) => renewals.recordRenewals(statuses),
		recordInterval: (ms) => cycles.recordInterval(ms),
		recordCluster(view) {
			const registered = clusterView !== undefined;
			clusterView = view;
			if (!registered) registerClusterMetrics(registry, () => clusterView?.());
		},
		recordAcmeOrder: (issuer, result) => renewals.recordAcmeOrder(issuer, result),
	};
}
