/**
 * The directory target as a cycle's TargetRunner: plan → planDirectoryTarget, sync → syncDirectoryTarget,
 * reported as one "endpoint" (the target's path) with one step per certificate that differs.
 */
import { type CertificateeError, errorView } from "../../errors.js";
import type { Verdict } from "../../reconcile/classify.js";
import type { CycleMode, TargetRunner } from "../../reconcile/cycle.js";
import type { DesiredCertificate } from "../../reconcile/model.js";
import { type EndpointReport, emptyEndpointReport, type StepView } from "../../reconcile/report.js";
import { type DirectoryTargetOptions, planDirectoryTarget, syncDirectoryTarget } from "./index.js";
import type { DirectoryTargetConfig } from "./schema.js";

export function createDirectoryRunner(
	config: DirectoryTargetConfig,
	options: DirectoryTargetOptions = {},
): TargetRunner {
	return {
		name: config.name,
		kind: "directory",
		async run(desired: readonly DesiredCertificate[], mode: CycleMode, _signal, onEndpoint) {
			const started = Date.now();
			const report =
				mode === "plan" ? await planReport(config, desired) : await syncReport(config, desired, options);
			const endpoint = { ...report, durationMs: Date.now() - started };
			onEndpoint?.(endpoint);
			return { target: config.name, kind: "directory", endpoints: [endpoint] };
		},
	};
}

const empty = (config: DirectoryTargetConfig) => emptyEndpointReport(config.name, config.path);

const serialOf = (desired: readonly DesiredCertificate[], name: string) =>
	desired.find((d) => d.name === name)?.bundle.leaf.serial;
const notAfterOf = (desired: readonly DesiredCertificate[], name: string) =>
	desired.find((d) => d.name === name)?.bundle.leaf.notAfter.toISOString();

function verdict(cls: "in-sync" | "stale" | "missing", ref: string, certificate: string): Verdict {
	return cls === "stale"
		? { class: "stale", ref, certificate, sides: ["storage"], missingSides: [] }
		: { class: cls, ref, certificate };
}

async function planReport(config: DirectoryTargetConfig, desired: readonly DesiredCertificate[]) {
	const plan = await planDirectoryTarget(config, desired);
	const report = empty(config);
	for (const c of plan.certificates) {
		const step = writeStep(c, desired);
		if (c.status === "failed") {
			failedStep(report, step, c.error);
			continue;
		}
		const missing = c.status === "would-write" && c.differences.includes("target does not exist");
		const cls = c.status === "unchanged" ? "in-sync" : missing ? "missing" : "stale";
		report.verdicts.push(verdict(cls, c.path, c.certificate));
		report.refs.push({ ref: c.path, class: cls, ...notAfter(desired, c.certificate) });
		if (c.status === "would-write") report.steps.push({ ...step, why: c.differences.join("; ") });
	}
	return report;
}

async function syncReport(
	config: DirectoryTargetConfig,
	desired: readonly DesiredCertificate[],
	options: DirectoryTargetOptions,
) {
	const result = await syncDirectoryTarget(config, desired, options);
	const report = empty(config);
	for (const c of result.certificates) {
		const step = writeStep(c, desired);
		if (c.status === "failed") {
			failedStep(report, step, c.error);
			continue;
		}
		report.verdicts.push(verdict("in-sync", c.path, c.certificate));
		report.refs.push({ ref: c.path, class: "in-sync", ...notAfter(desired, c.certificate) });
		report.notes.push(...c.problems.map((p) => `${c.certificate}: ${p.message}`));
		if (c.status === "written") report.steps.push({ ...step, why: c.differences.join("; "), result: "ok" });
		if (c.hook !== undefined) {
			const hook: StepView = {
				op: "on-change",
				ref: c.path,
				certificate: c.certificate,
				why:
					c.status === "written" ? "files changed" : "retrying: it has not succeeded since the files changed",
			};
			report.steps.push(
				c.hook.ok ? { ...hook, result: "ok" } : { ...hook, result: "failed", error: errorView(c.hook.error) },
			);
		}
	}
	return report;
}

function writeStep(
	c: { path: string; certificate: string },
	desired: readonly DesiredCertificate[],
): StepView {
	const step: StepView = { op: "directory-write", ref: c.path, certificate: c.certificate, why: "" };
	const serial = serialOf(desired, c.certificate);
	if (serial !== undefined) step.serial = serial;
	return step;
}

function failedStep(report: EndpointReport, step: StepView, error: CertificateeError): void {
	report.ok = false;
	report.steps.push({ ...step, why: "cannot be written", result: "failed", error: errorView(error) });
}

function notAfter(desired: readonly DesiredCertificate[], name: string): { notAfter?: string } {
	const value = notAfterOf(desired, name);
	return value === undefined ? {} : { notAfter: value };
}
