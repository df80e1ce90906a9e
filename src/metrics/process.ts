/**
 * The daemon's own metrics beside the certificate ones: Node.js process metrics (prom-client's default
 * collectors: `process_*`, `nodejs_*`), `certificatee_build_info`, and whether the last SIGHUP's configuration
 * was taken. Registered by the daemon only (one-shot commands have no scrape endpoint).
 */
import { collectDefaultMetrics, Gauge, type Registry } from "prom-client";
import { VERSION } from "../version.js";
import type { LoopHealth } from "./health.js";

export function registerDaemonMetrics(registry: Registry, health: () => LoopHealth): void {
	collectDefaultMetrics({ register: registry });
	new Gauge({
		name: "certificatee_build_info",
		help: "Always 1; the labels say which certificatee and Node.js run.",
		labelNames: ["version", "nodejs"],
		registers: [registry],
	}).set({ version: VERSION, nodejs: process.version }, 1);
	new Gauge({
		name: "certificatee_config_last_reload_successful",
		help: "1 when the configuration last loaded (at start or on SIGHUP) was taken; 0 when the last SIGHUP's was rejected and the old one runs on.",
		registers: [registry],
		collect() {
			this.set(health().configRejected ? 0 : 1);
		},
	});
	new Gauge({
		name: "certificatee_config_last_reload_success_timestamp_seconds",
		help: "When the running configuration was loaded (at start or on a SIGHUP that was taken).",
		registers: [registry],
		collect() {
			const h = health();
			this.set((h.configLoadedAt ?? h.startedAt) / 1000);
		},
	});
}
