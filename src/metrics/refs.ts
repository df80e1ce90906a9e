/**
 * The refs an endpoint holds once the cycle's writes are done, for the expiry gauge. The observation was
 * taken before the writes: a ref written this cycle now holds the desired certificate, and a ref whose
 * deletion succeeded is gone, so the gauge must not keep the old expiry until the next cycle. Pure.
 */
import { type CycleReport, type EndpointReport, stepCounts } from "../reconcile/report.js";

export interface RefExpiry {
	ref: string;
	class: string;
	notAfter: string;
}

export function refsAfterCycle(e: EndpointReport, certificates: CycleReport["certificates"]): RefExpiry[] {
	const out: RefExpiry[] = [];
	for (const r of e.refs) {
		const steps = e.steps.filter((s) => s.ref === r.ref);
		const counts = stepCounts(steps);
		const done = counts.total > 0 && counts.open === 0;
		if (done && steps.some((s) => s.op.endsWith("-delete"))) continue;
		const written = done
			? steps
					.map((s) => certificates.find((c) => c.name === s.certificate && c.serial === s.serial))
					.find((c) => c !== undefined)
			: undefined;
		const notAfter = written?.notAfter ?? r.notAfter;
		if (notAfter) out.push({ ref: r.ref, class: r.class, notAfter });
	}
	return out;
}
