/** The verdicts `status`, /status.json and the fleet page show, as gauges: per endpoint, per certificate, per cycle. */
import type { Registry } from "prom-client";
import { cycleOutcome } from "../reconcile/outcome.js";
import { type LastCycle, scrapeGauges } from "./last-cycle.js";

const ENDPOINT_STATES = ["converged", "pending", "failed", "unobserved"] as const;

export function registerFleetStateMetrics(registry: Registry, cycle: LastCycle): void {
	const gauge = scrapeGauges(registry);
	gauge(
		"certificatee_endpoint_state",
		"1 for the endpoint's state after the last cycle (converged, pending, failed, unobserved), 0 for the others: the state status and the fleet page show.",
		["target", "endpoint", "state"],
		(g) => {
			for (const e of cycle.summary()?.endpoints ?? [])
				for (const state of ENDPOINT_STATES)
					g.set({ target: e.target, endpoint: e.endpoint, state }, e.state === state ? 1 : 0);
		},
	);
	gauge(
		"certificatee_certificate_endpoints",
		"Endpoints of the target that carry the certificate (status's converged/total: the total).",
		["certificate", "target"],
		(g) => {
			for (const c of cycle.summary()?.certificates ?? [])
				for (const t of c.targets) g.set({ certificate: c.name, target: t.target }, t.total);
		},
	);
	gauge(
		"certificatee_certificate_endpoints_converged",
		"Endpoints of the target on which the certificate is converged (status's converged/total: converged).",
		["certificate", "target"],
		(g) => {
			for (const c of cycle.summary()?.certificates ?? [])
				for (const t of c.targets) g.set({ certificate: c.name, target: t.target }, t.converged);
		},
	);
	gauge(
		"certificatee_cycle_converged",
		"1 when the last cycle converged (what `sync --once` would exit 0 for): nothing failed, nothing pending.",
		[],
		(g) => {
			const last = cycle.report();
			if (last !== undefined) g.set(cycleOutcome(last).converged ? 1 : 0);
		},
	);
}
