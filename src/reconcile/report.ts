/** What a cycle found and did: JSON-safe, free of key material. `plan --json` prints it unchanged. */
import type { Verdict } from "./classify.js";
import type { Action } from "./model.js";
import type { ServingAfter } from "./serving.js";

/** An action as shown in plans and reports: never the bundle, only its identity. */
export interface StepView {
	op: string;
	ref: string;
	certificate?: string;
	/** Serial of the certificate being written. */
	serial?: string;
	crtList?: string;
	why: string;
	/** Absent in a plan; set once applied. */
	result?: "ok" | "failed" | "skipped";
	error?: { code: string; message: string; hint?: string };
	note?: string;
	reloadCaused?: { reloadId?: string; reason: string };
}

export interface ServedView {
	sni: string;
	certificate: string;
	expectedSerial: string;
	servedSerial?: string;
	match: boolean;
	error?: string;
}

export interface EndpointReport {
	target: string;
	endpoint: string;
	ok: boolean;
	error?: { code: string; message: string; hint?: string };
	verdicts: Verdict[];
	steps: StepView[];
	notes: string[];
	/** Which ref serves each name of every certificate written at runtime, once the writes ran (as planned). */
	servingAfter?: ServingAfter[];
	served: ServedView[];
	/** Refs observed, with expiry and class, for metrics (unmanaged ones too). */
	refs: Array<{ ref: string; class: Verdict["class"]; notAfter?: string }>;
	durationMs: number;
}

export interface TargetReport {
	target: string;
	kind: string;
	endpoints: EndpointReport[];
}

export interface CycleReport {
	mode: "plan" | "sync";
	startedAt: string;
	durationMs: number;
	certificates: Array<{
		name: string;
		names: string[];
		origin: string;
		serial: string;
		notAfter: string;
	}>;
	sourceProblems: Array<{ subject: string; code: string; message: string }>;
	targets: TargetReport[];
}

export function viewAction(action: Action, why: string): StepView {
	const base: StepView = { op: action.op, ref: action.ref, why };
	if ("certificate" in action) {
		base.certificate = action.certificate;
		if ("bundle" in action) base.serial = action.bundle.leaf.serial;
	}
	if ("crtList" in action) base.crtList = action.crtList;
	return base;
}

export function pendingChanges(report: CycleReport): number {
	return report.targets.reduce(
		(n, t) => n + t.endpoints.reduce((m, e) => m + e.steps.filter((s) => s.result !== "ok").length, 0),
		0,
	);
}

export function failedEndpoints(report: CycleReport): EndpointReport[] {
	return report.targets.flatMap((t) =>
		t.endpoints.filter((e) => !e.ok || e.steps.some((s) => s.result === "failed")),
	);
}
