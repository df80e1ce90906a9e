/** The judgement after a reload and the reloads view it leaves, as tables: pure, no HAProxy. */
import { beforeAll, describe, expect, it } from "vitest";
import { CertificateeError } from "../../../../src/errors.js";
import type { DesiredCertificate } from "../../../../src/reconcile/model.js";
import type { ServedView } from "../../../../src/reconcile/report.js";
import type { ObservedRef, ReloadOutcome } from "../../../../src/targets/haproxy/engine/model.js";
import type { ReloadNeed, ReloadRecord } from "../../../../src/targets/haproxy/engine/reload-budget.js";
import { judgeReload, nextReloadsView } from "../../../../src/targets/haproxy/engine/reload-judgement.js";
import { desiredCert, metaOf, oldMeta, ref } from "../../../reconcile/scenario.js";

let d: DesiredCertificate;
beforeAll(async () => {
	d = await desiredCert("a", ["a.test"]);
});

const need: ReloadNeed = { ref: "a.pem", certificate: "a", reason: "new-certificate" };
const reloaded: ReloadOutcome = { ok: true, from: 1, to: 2, detail: "worker 1 -> 2" };
const probe = (match: boolean): { view: ServedView } => ({
	view: {
		sni: "a.test",
		certificate: "a",
		expectedSerial: "01",
		match,
		...(match ? { servedSerial: "01" } : { servedSerial: "0BAD" }),
	},
});
const judge = (outcome: ReloadOutcome, served: Array<{ view: ServedView }>, held: "new" | "old" | "none") => {
	const runtime = held === "new" ? metaOf(d) : held === "old" ? oldMeta(["a.test"]) : undefined;
	const refs: ObservedRef[] = [
		ref("a.pem", runtime ? { storage: metaOf(d), runtime } : { storage: metaOf(d) }),
	];
	return judgeReload({
		needs: [need],
		desired: [{ ref: "a.pem", certificate: d }],
		state: { served, observation: { refs } },
		outcome,
	});
};

describe("judgeReload", () => {
	it("a reload that failed is failed, with the driver's error", () => {
		const failed: ReloadOutcome = {
			ok: false,
			error: new CertificateeError("RELOAD_FAILED", "show proc: 1"),
		};
		expect(judge(failed, [probe(true)], "new")).toEqual({
			result: "failed",
			message: "RELOAD_FAILED: show proc: 1",
		});
	});

	it("ok when every changed name probed serves what was written, whatever the worker holds", () => {
		expect(judge(reloaded, [probe(true)], "old")).toEqual({
			result: "ok",
			message: "worker 1 -> 2; every changed name serves what was written",
		});
	});

	it("not served when a changed name serves something else: the first such name is named", () => {
		expect(judge(reloaded, [probe(false)], "new")).toEqual({
			result: "not-served",
			message: "worker 1 -> 2; but a.test serves 0BAD",
		});
	});

	it("without a probe, the new worker's memory decides", () => {
		expect(judge(reloaded, [], "new").result).toBe("ok");
		expect(judge(reloaded, [], "none")).toEqual({
			result: "not-served",
			message: "worker 1 -> 2; but the new worker does not hold what was written",
		});
	});
});

describe("nextReloadsView", () => {
	const at = new Date("2026-12-02T12:00:00Z");
	const now = new Date("2026-12-02T12:00:05Z");
	const earlier: ReloadRecord = { at: "2026-12-02T11:30:00Z", reasons: ["too-large"], result: "ok" };
	const view = (judgement: { result: ReloadRecord["result"]; message: string }) =>
		nextReloadsView({
			budget: { maxPerHour: 2, history: [earlier] },
			at,
			now,
			reasons: ["new-certificate"],
			certificates: ["a"],
			why: "certificatee reloaded HAProxy (new-certificate: a.pem)",
			judgement,
		});

	it("counts the reload against the budget and reports it, the breaker left closed when it is ok", () => {
		const record: ReloadRecord = { at: at.toISOString(), reasons: ["new-certificate"], result: "ok" };
		expect(view({ result: "ok", message: "served" })).toEqual({
			budget: { maxPerHour: 2, used: 2, remaining: 0, nextAt: "2026-12-02T12:30:00.000Z" },
			recent: [earlier, record],
			cycle: {
				decision: "reloaded",
				reasons: ["new-certificate"],
				certificates: ["a"],
				message: "certificatee reloaded HAProxy (new-certificate: a.pem): served",
				result: "ok",
			},
		});
	});

	it("opens the breaker on a reload that is not ok", () => {
		expect(view({ result: "not-served", message: "but a.test serves 0BAD" }).breaker).toEqual({
			openedAt: at.toISOString(),
			code: "RELOAD_FAILED",
			message: "certificatee reloaded HAProxy (new-certificate: a.pem): but a.test serves 0BAD",
		});
	});
});
