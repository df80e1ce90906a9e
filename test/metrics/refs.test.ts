/** metrics/refs: which expiry each ref reports once the cycle's writes are done. Pure, no I/O. */
import { describe, expect, it } from "vitest";
import { refsAfterCycle } from "../../src/metrics/refs.js";
import type { CycleReport, EndpointReport, StepView } from "../../src/reconcile/report.js";

const OLD = "2026-12-01T00:00:00.000Z";
const NEW = "2027-03-01T00:00:00.000Z";
const certificates: CycleReport["certificates"] = [
	{ name: "a", names: ["a.test"], origin: "test", serial: "0A", notBefore: OLD, notAfter: NEW },
];

function endpoint(steps: StepView[], refs: EndpointReport["refs"]): EndpointReport {
	return {
		target: "t",
		endpoint: "e",
		ok: true,
		verdicts: [],
		steps,
		notes: [],
		served: [],
		refs,
		durationMs: 0,
	};
}
const write = (op: StepView["op"], result: StepView["result"], serial = "0A"): StepView => ({
	op,
	ref: "a.pem",
	certificate: "a",
	serial,
	why: "stale",
	...(result ? { result } : {}),
});

describe("metrics/refs", () => {
	const cases: Array<[string, StepView[], string | undefined]> = [
		[
			"a ref written this cycle reports the certificate written",
			[write("storage-replace", "ok"), write("runtime-set", "ok")],
			NEW,
		],
		[
			"a write that failed keeps the observed expiry",
			[write("storage-replace", "ok"), write("runtime-set", "failed")],
			OLD,
		],
		["a plan (no result) keeps the observed expiry", [write("storage-replace", undefined)], OLD],
		["a write of another serial keeps the observed expiry", [write("storage-replace", "ok", "0B")], OLD],
		["a ref untouched keeps its expiry", [], OLD],
		[
			"a ref deleted this cycle is gone",
			[
				{ op: "runtime-delete", ref: "a.pem", why: "dup", result: "ok" },
				{ op: "storage-delete", ref: "a.pem", why: "dup", result: "ok" },
			],
			undefined,
		],
		[
			"a ref whose delete failed is still there",
			[{ op: "runtime-delete", ref: "a.pem", why: "dup", result: "failed" }],
			OLD,
		],
	];
	it.each(cases)("%s", (_name, steps, expected) => {
		const refs = refsAfterCycle(
			endpoint(steps, [{ ref: "a.pem", class: "stale", notAfter: OLD }]),
			certificates,
		);
		expect(refs.map((r) => r.notAfter)).toEqual(expected ? [expected] : []);
	});
});
