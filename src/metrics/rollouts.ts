/** Where each certificate's rollout is (canary, hold, rest, halted) and, halted, why. */
import type { Registry } from "prom-client";
import { type LastCycle, scrapeGauges } from "./last-cycle.js";

const STAGES = ["canary", "hold", "rest", "halted"] as const;

export function registerRolloutMetrics(registry: Registry, cycle: LastCycle): void {
	const gauge = scrapeGauges(registry);
	gauge(
		"certificatee_rollout_stage",
		"1 for the stage each certificate's rollout is in (canary, hold, rest, halted), 0 for the others.",
		["certificate", "stage"],
		(g) => {
			for (const r of cycle.report()?.rollouts ?? [])
				for (const stage of STAGES) g.set({ certificate: r.certificate, stage }, r.stage === stage ? 1 : 0);
		},
	);
	gauge(
		"certificatee_rollout_halted",
		"1 per halted rollout: the canary and the check that failed, with its code.",
		["certificate", "endpoint", "check", "code"],
		(g) => {
			for (const r of cycle.report()?.rollouts ?? [])
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
}
