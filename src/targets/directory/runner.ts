/**
 * The directory target's cycle, the same four steps as an HAProxy endpoint's: observe every desired set,
 * classify and plan (pure, plan.ts), apply the writes in order (sync), report. A directory target is one
 * endpoint, its path; a set that cannot be written is a failed step, never an exception.
 */
import { createTrustCache, type TrustStore } from "../../certificates/trust.js";
import { errorView } from "../../errors.js";
import { auditWrites } from "../../reconcile/audit.js";
import type { TargetRunner } from "../../reconcile/cycle.js";
import { trustHolds } from "../../reconcile/holds.js";
import type { DesiredCertificate, PlannedStep } from "../../reconcile/model.js";
import { emptyEndpointReport, type StepView, viewAction } from "../../reconcile/report.js";
import { type DirectoryAction, directoryEffect } from "./action.js";
import {
	createDirectoryDriver,
	type DirectoryDriver,
	type DirectoryTargetOptions,
	type ObservedSet,
} from "./index.js";
import { classifySet, planSet, type SetVerdict } from "./plan.js";
import type { DirectoryTargetConfig } from "./schema.js";

/** A step of the report, with the write it stands for (none: the set could not be observed). */
interface Entry {
	set: ObservedSet;
	view: StepView;
	action?: DirectoryAction;
}

export function createDirectoryRunner(
	config: DirectoryTargetConfig,
	options: DirectoryTargetOptions = {},
	now: () => Date = () => new Date(),
	policy: {
		neverDowngrade?: boolean;
		/** The target's trust_store, and each certificate's own: a chain that does not verify is never written. */
		trust?: TrustStore;
		certificateTrust?: (certificate: string) => TrustStore | undefined;
		/** A cluster's say over the endpoint (its path): one this member does not own is left out of its cycle. */
		owns?: (endpoint: string) => boolean;
	} = {},
): TargetRunner {
	const neverDowngrade = policy.neverDowngrade === true;
	const verify = createTrustCache();
	const driver = createDirectoryDriver(config, options);
	return {
		name: config.name,
		kind: "directory",
		carries: (certificate) => config.certificates?.includes(certificate) ?? true,
		async run(desired, mode, signal, onEndpoint, _rollout, awaiting) {
			if (policy.owns && !policy.owns(config.path))
				return { target: config.name, kind: "directory", endpoints: [] };
			const started = now().getTime();
			const observation = await driver.observe(desired, signal, awaiting);
			const byName = new Map(desired.map((d) => [d.name, d]));
			const entries = observation.sets.flatMap((set) => entriesOf(set, byName, config, neverDowngrade));
			const holds = trustHolds(
				config.name,
				desired.map((certificate) => ({ certificate })),
				policy.trust,
				now(),
				policy.certificateTrust,
				verify,
			);
			for (const e of entries) {
				const hold = e.view.certificate === undefined ? undefined : holds.get(e.view.certificate);
				if (hold === undefined || e.action === undefined) continue;
				delete e.action;
				if (mode === "sync") e.view.result = "skipped";
				e.view.note = `${hold.code}: ${hold.message}`;
			}
			if (mode === "sync") await applyInOrder(driver, entries, signal);
			const inSync = observation.sets.flatMap((set) =>
				settled(set, byName.get(set.certificate), entries, { mode, neverDowngrade }),
			);
			const steps = entries.map((e) => e.view);
			const live = new Map(
				observation.sets.flatMap((set) => (set.ok && set.live?.serial ? [[set.path, set.live.serial]] : [])),
			);
			const audit =
				mode === "sync"
					? auditWrites(
							{ target: config.name, endpoint: observation.endpoint },
							steps,
							(ref) => live.get(ref),
							directoryEffect,
						)
					: [];
			const endpoint = {
				...emptyEndpointReport(config.name, observation.endpoint),
				verdicts: inSync,
				steps,
				...(audit.length > 0 ? { audit } : {}),
				...(holds.size > 0 ? { held: [...holds.values()] } : {}),
				refs: inSync.map((v) => ({ ref: v.ref, class: v.class, ...notAfter(byName.get(v.certificate)) })),
				durationMs: now().getTime() - started,
			};
			onEndpoint?.(endpoint);
			return { target: config.name, kind: "directory", endpoints: [endpoint] };
		},
	};
}

function entriesOf(
	set: ObservedSet,
	desired: ReadonlyMap<string, DesiredCertificate>,
	config: DirectoryTargetConfig,
	neverDowngrade: boolean,
): Entry[] {
	if (!set.ok) {
		const serial = desired.get(set.certificate)?.bundle.leaf.serial;
		const view: StepView = {
			op: "directory-write",
			ref: set.path,
			certificate: set.certificate,
			...(serial === undefined ? {} : { serial }),
			why: "cannot be written",
			result: "failed",
			error: errorView(set.error),
		};
		return [{ set, view }];
	}
	const options = { onChange: config.on_change !== undefined, neverDowngrade };
	return planSet(set, desired, options).map((s: PlannedStep<DirectoryAction>) => ({
		set,
		view: viewAction(s.action, s.why),
		action: s.action,
	}));
}

/** Phase 3: one write at a time; after a set's write failed, its on_change is skipped. */
async function applyInOrder(driver: DirectoryDriver, entries: Entry[], signal: AbortSignal): Promise<void> {
	const failed = new Set<string>();
	for (const { action, view } of entries) {
		if (action === undefined) continue;
		if (failed.has(action.ref) || signal.aborted) {
			view.result = "skipped";
			view.note = signal.aborted ? "stopping" : "an earlier write for this ref failed";
			continue;
		}
		const result = await driver.apply(action, signal);
		view.result = result.ok ? "ok" : "failed";
		if (result.note) view.note = result.note;
		if (result.error) view.error = errorView(result.error);
		if (!result.ok && action.op === "directory-write") failed.add(action.ref);
	}
}

/**
 * The verdict of each set once the cycle is done: plan, as observed; sync, in-sync once its write succeeded
 * (or none was needed); a refused set stays refused. A set not written has none (its failed step says why).
 */
function settled(
	set: ObservedSet,
	desired: DesiredCertificate | undefined,
	entries: readonly Entry[],
	how: { mode: "plan" | "sync"; neverDowngrade: boolean },
): SetVerdict[] {
	if (!set.ok) return [];
	const verdict = classifySet(set, desired, how.neverDowngrade);
	if (how.mode === "plan" || verdict.class === "refused") return [verdict];
	const write = entries.find((e) => e.set === set && e.view.op === "directory-write");
	if (write !== undefined && write.view.result !== "ok") return [];
	return [{ class: "in-sync", ref: set.path, certificate: set.certificate }];
}

function notAfter(certificate: DesiredCertificate | undefined): { notAfter?: string } {
	return certificate === undefined ? {} : { notAfter: certificate.bundle.leaf.notAfter.toISOString() };
}
