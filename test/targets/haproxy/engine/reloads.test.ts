/**
 * After a reload during the writes, each step's result is settled on what the serving worker holds (pure: no
 * HAProxy). The real-HAProxy proof is reload-during-cycle.test.ts.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { CertificateeError } from "../../../../src/errors.js";
import type { DesiredCertificate } from "../../../../src/reconcile/model.js";
import { type StepView, viewAction } from "../../../../src/reconcile/report.js";
import type { HaproxyAction, ObservedRef } from "../../../../src/targets/haproxy/engine/model.js";
import {
	holds,
	redoView,
	settleOnDeadWorker,
	settleOnWorker,
} from "../../../../src/targets/haproxy/engine/reloads.js";
import { desiredCert, metaOf, oldMeta, ref } from "../../../reconcile/scenario.js";

let d: DesiredCertificate;
beforeAll(async () => {
	d = await desiredCert("a", ["a.test"]);
});

const set = (): HaproxyAction => ({
	op: "runtime-set",
	ref: "a.pem",
	runtimeName: "/etc/haproxy/ssl/a.pem",
	certificate: "a",
	bundle: d.bundle,
});
const store = (): HaproxyAction => ({
	op: "storage-replace",
	ref: "a.pem",
	certificate: "a",
	bundle: d.bundle,
});
const applied = (action: HaproxyAction, result: StepView["result"], extra: Partial<StepView> = {}) => ({
	action,
	view: { ...viewAction(action, "stale"), result, ...extra },
});

describe("settling steps on the serving worker after a reload", () => {
	it.each([
		["runtime-set ok, new worker holds the old certificate", "runtime-set", "ok", "old", "failed"],
		["runtime-set ok, new worker loaded the new file", "runtime-set", "ok", "new", "ok"],
		[
			"runtime-set failed (reloaded mid-write), new worker loaded the new file",
			"runtime-set",
			"failed",
			"new",
			"ok",
		],
		["runtime-set failed, new worker holds the old certificate", "runtime-set", "failed", "old", "failed"],
		["storage-replace ok, file holds it", "storage-replace", "ok", "new", "ok"],
	] as const)("%s", (_, op, before, held, after) => {
		const step = applied(op === "runtime-set" ? set() : store(), before, {
			...(before === "failed" ? { error: { code: "RUNTIME_RELOADED", message: "reloaded" } } : {}),
		});
		const meta = held === "new" ? metaOf(d) : oldMeta(["a.test"]);
		const observed: ObservedRef[] = [ref("a.pem", { storage: meta, runtime: meta })];
		settleOnWorker([step], { refs: observed }, "HAProxy reloaded (worker 1 -> 2)");
		expect(step.view.result).toBe(after);
		expect(step.view.error?.code).toBe(after === "failed" ? "RUNTIME_RELOADED" : undefined);
	});

	it("a pinned step and a step never applied are left as they are", () => {
		const pinned = applied(set(), "skipped", { note: "pinned: a crt line", pinned: "a crt line" });
		const planned = { action: set(), view: viewAction(set(), "stale") };
		settleOnWorker([pinned, planned], { refs: [ref("a.pem", { runtime: metaOf(d) })] }, "reloaded");
		expect(pinned.view.result).toBe("skipped");
		expect(planned.view.result).toBeUndefined();
	});

	it("removals are held when the ref, its runtime entry or its crt-list entry is gone", () => {
		const gone = undefined;
		const listed = ref("dup.pem", { storage: oldMeta(["a.test"]), runtime: oldMeta(["a.test"]) });
		const remove = {
			op: "crt-list-remove",
			ref: "dup.pem",
			runtimeName: "x",
			crtList: "/etc/haproxy/ssl",
		} as const;
		expect(holds(gone, remove)).toBe(true);
		expect(holds(listed, remove)).toBe(false);
		expect(holds(listed, { op: "runtime-delete", ref: "dup.pem", runtimeName: "x" })).toBe(false);
		expect(
			holds(ref("dup.pem", { storage: oldMeta(["a.test"]) }), { op: "storage-delete", ref: "dup.pem" }),
		).toBe(false);
	});

	it("a redo reports in the lost step's place; a step the first pass did not plan is added", () => {
		const lost = applied(set(), "failed", { error: { code: "RUNTIME_RELOADED", message: "lost" } });
		const written = [lost];
		const steps = [lost.view];
		const view = redoView(written, steps, set(), "stale; redo, pass 2");
		expect(view).toBe(lost.view);
		expect(view.result).toBeUndefined();
		expect(view.error).toBeUndefined();
		expect(view.why).toContain("redo, pass 2");
		const added = redoView(written, steps, store(), "stale; redo, pass 2");
		expect(steps).toEqual([lost.view, added]);
	});
});

describe("settling steps when the worker written to died (no worker answers)", () => {
	const gone = new CertificateeError("ENDPOINT_UNAVAILABLE", "HAProxy on lb1 no longer answers (worker 7)", {
		hint: "start it again",
	});
	it.each([
		["runtime-set ok: held by no process", set, "ok", "failed"],
		["storage-replace ok: on disk, what the next start loads", store, "ok", "ok"],
		["runtime-set already failed: left as it is", set, "failed", "failed"],
	] as const)("%s", (_, action, before, after) => {
		const step = applied(action(), before);
		settleOnDeadWorker([step], gone);
		expect(step.view.result).toBe(after);
		if (before === "ok" && after === "failed") {
			expect(step.view.error).toEqual({
				code: "ENDPOINT_UNAVAILABLE",
				message:
					"runtime-set a.pem: HAProxy on lb1 no longer answers (worker 7); no running HAProxy holds this write",
				hint: "start it again",
			});
		}
	});
});
