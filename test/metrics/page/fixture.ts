/** A status document for the page's tests: two certificates (one named with markup), a duplicate removed, a reload caused, an endpoint down. */
import { type StatusDocument, statusDocument } from "../../../src/metrics/status-view.js";
import type { CycleReport, EndpointReport } from "../../../src/reconcile/report.js";

export const NOW = new Date("2026-03-01T00:00:00Z");
export const HOSTILE = `<img src=x onerror="alert('x')">&`;

function endpoint(
	over: Partial<EndpointReport> & Pick<EndpointReport, "target" | "endpoint">,
): EndpointReport {
	return { ok: true, verdicts: [], steps: [], notes: [], served: [], refs: [], durationMs: 3, ...over };
}

/** Two certificates, a converged endpoint that removed a duplicate and caused a reload, one that is down. */
export function fixture(): StatusDocument {
	const report: CycleReport = {
		mode: "sync",
		startedAt: "2026-03-01T00:00:00.000Z",
		durationMs: 42,
		certificates: [
			{
				name: "shop",
				names: ["shop.test"],
				origin: "files",
				serial: "0A",
				notBefore: "2026-01-01T00:00:00.000Z",
				notAfter: "2026-04-01T00:00:00.000Z",
			},
			{
				name: HOSTILE,
				names: [`${HOSTILE}.test`],
				origin: "files",
				serial: "0B",
				notBefore: "2026-02-01T00:00:00.000Z",
				notAfter: "2026-05-01T00:00:00.000Z",
			},
		],
		sourceProblems: [{ subject: "bad.pem", code: "SOURCE_INVALID", message: `bad.pem: ${HOSTILE}` }],
		targets: [
			{
				target: "lb1",
				kind: "haproxy-runtime",
				endpoints: [
					endpoint({
						target: "lb1",
						endpoint: "lb1",
						verdicts: [
							{ class: "in-sync", ref: "shop.pem", certificate: "shop" },
							{ class: "in-sync", ref: "h.pem", certificate: HOSTILE },
							{
								class: "legacy-duplicate",
								ref: "old_shop.pem",
								certificate: "shop",
								keeper: "shop.pem",
								keeperStable: true,
								staleSides: [],
							},
						],
						steps: [
							{ op: "runtime-delete", ref: "old_shop.pem", why: "duplicate", result: "ok" },
							{
								op: "storage-delete",
								ref: "old_shop.pem",
								why: "duplicate",
								result: "ok",
								reloadCaused: { reloadId: "r7", reason: "the server answered 202" },
							},
						],
					}),
				],
			},
			{
				target: "lb-down",
				kind: "haproxy-runtime",
				endpoints: [
					endpoint({
						target: "lb-down",
						endpoint: "lb-down",
						ok: false,
						error: { code: "ENDPOINT_UNAVAILABLE", message: `cannot connect: ${HOSTILE}`, hint: "start it" },
					}),
				],
			},
		],
	};
	return statusDocument(report, []);
}
