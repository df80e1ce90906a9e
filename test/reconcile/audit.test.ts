/** The audit trail, pure: which steps and probes become events, with which serials. */
import { describe, expect, it } from "vitest";
import { auditServed } from "../../src/reconcile/audit.js";
import type { ServedView, StepView } from "../../src/reconcile/report.js";
import { auditSteps, observedSerial } from "../../src/targets/haproxy/engine/audit.js";
import type { ObservedRef } from "../../src/targets/haproxy/engine/model.js";

const where = { target: "lb", endpoint: "lb1" };
const refs: ObservedRef[] = [
	{
		ref: "a.pem",
		storage: { serial: "0A" },
		runtime: { serial: "09" },
		crtLists: ["/etc/haproxy/certs.lst"],
	},
	{ ref: "legacy_a.pem", storage: { serial: "01" }, runtime: { serial: "01" }, crtLists: [] },
];
const step = (op: StepView["op"], ref: string, result: StepView["result"], serial?: string): StepView => ({
	op,
	ref,
	why: "test",
	...(op === "on-change" || op.includes("delete") || op.includes("remove") ? {} : { certificate: "a" }),
	...(serial ? { serial } : {}),
	...(result ? { result } : {}),
});

describe("reconcile/audit", () => {
	it("one event per step done: writes carry the side's old serial and the new one, removals the old one only; planned, failed, skipped and hook steps are none", () => {
		const events = auditSteps(
			where,
			[
				step("storage-replace", "a.pem", "ok", "0B"),
				step("runtime-set", "a.pem", "ok", "0B"),
				step("crt-list-remove", "legacy_a.pem", "ok"),
				step("runtime-delete", "legacy_a.pem", "ok"),
				step("storage-delete", "legacy_a.pem", "failed"),
				step("runtime-set", "b.pem", undefined, "0C"),
				step("runtime-set", "c.pem", "skipped", "0D"),
				step("on-change", "/srv/a", "ok"),
			],
			observedSerial(refs),
		);
		expect(events.map((e) => [e.event, e.op, e.ref, e.oldSerial, e.newSerial])).toEqual([
			["write", "storage-replace", "a.pem", "0A", "0B"],
			["write", "runtime-set", "a.pem", "09", "0B"],
			["removal", "crt-list-remove", "legacy_a.pem", "01", undefined],
			["removal", "runtime-delete", "legacy_a.pem", "01", undefined],
		]);
		expect(events.every((e) => e.target === "lb" && e.endpoint === "lb1")).toBe(true);
	});

	it("a created ref has no old serial", () => {
		const [event] = auditSteps(where, [step("storage-create", "new.pem", "ok", "0E")], observedSerial(refs));
		expect(event).toEqual({
			event: "write",
			...where,
			certificate: "a",
			ref: "new.pem",
			op: "storage-create",
			newSerial: "0E",
		});
	});

	it("one event per probed name whose served serial changed; none when it did not or the probe failed", () => {
		const view = (sni: string, servedSerial: string | undefined, match: boolean): ServedView => ({
			sni,
			certificate: "a",
			expectedSerial: "0B",
			...(servedSerial ? { servedSerial } : {}),
			match,
		});
		const events = auditServed(
			where,
			[
				view("a.test", "0A", false),
				view("www.a.test", "0B", true),
				view("new.a.test", undefined, false),
				view("down.a.test", "0A", false),
			],
			[
				view("a.test", "0B", true),
				view("www.a.test", "0B", true),
				view("new.a.test", "0B", true),
				view("down.a.test", undefined, false),
			],
		);
		expect(events.map((e) => [e.sni, e.oldSerial, e.newSerial, e.match])).toEqual([
			["a.test", "0A", "0B", true],
			["new.a.test", undefined, "0B", true],
		]);
	});
});
