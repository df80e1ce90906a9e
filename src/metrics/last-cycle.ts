/**
 * What the scrape-time gauges read: the last finished cycle's report, the status summary built from it (once per
 * cycle) and its endpoints; and the helper that registers such a gauge.
 */
import { Gauge, type Registry } from "prom-client";
import type { CycleReport, EndpointReport } from "../reconcile/report.js";
import { type StatusSummary, statusSummary } from "./status-view.js";

export interface LastCycle {
	report(): CycleReport | undefined;
	/** The verdicts status, /status.json and the fleet page show: the same summary. */
	summary(): StatusSummary | undefined;
	endpoints(): EndpointReport[];
}

/** The last cycle, replaced by `set` after each cycle; its summary is built on the first scrape that asks. */
export function lastCycle(): LastCycle & { set(report: CycleReport): void } {
	let last: CycleReport | undefined;
	let summarised: { report: CycleReport; summary: StatusSummary } | undefined;
	return {
		set: (report) => {
			last = report;
		},
		report: () => last,
		summary: () => {
			if (last === undefined) return undefined;
			if (summarised?.report !== last) summarised = { report: last, summary: statusSummary(last) };
			return summarised.summary;
		},
		endpoints: () => (last?.targets ?? []).flatMap((t) => t.endpoints),
	};
}

export type GaugeOf = (
	name: string,
	help: string,
	labelNames: string[],
	collect: (g: Gauge) => void,
) => Gauge;

/** Registers gauges on `registry` whose series are computed afresh at each scrape (a gone series disappears). */
export function scrapeGauges(registry: Registry): GaugeOf {
	return (name, help, labelNames, collect) =>
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
}

export const seconds = (iso: string | Date): number => new Date(iso).getTime() / 1000;

/** The key of an endpoint across cycles. */
export const endpointKey = (e: EndpointReport): string => `${e.target}\u0000${e.endpoint}`;
