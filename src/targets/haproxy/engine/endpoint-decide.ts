/** Phase 2 of an endpoint: classify the complete picture, then plan; and the verdicts the writes leave. Pure. */
import type { ServedCertificate } from "../../../reconcile/model.js";
import { type HeldView, type StepView, viewAction } from "../../../reconcile/report.js";
import { classifyEndpoint, type Side, type Verdict } from "./classify.js";
import type { EndpointJob, Probed } from "./endpoint-state.js";
import type { Observed } from "./liveness.js";
import { type HaproxyAction, runtimeNameOf } from "./model.js";
import { planEndpoint } from "./plan.js";

export type Plan = ReturnType<typeof planEndpoint>;
export type HeldStep = { step: Plan["steps"][number]; hold: HeldView };

export function decide(
	job: EndpointJob,
	observation: Observed,
	probed: ReadonlyArray<{ served?: ServedCertificate }>,
): { verdicts: Verdict[]; plan: Plan; held: HeldStep[] } {
	const served = probed.flatMap((s) => (s.served ? [s.served] : []));
	const verdicts = classifyEndpoint({
		desired: job.desired,
		refs: observation.refs,
		policy: job.policy,
		served,
		...(job.driver.probe === undefined ? { unprobed: true } : {}),
		...(job.knownPinned ? { knownPinned: job.knownPinned } : {}),
		...(observation.crtLists ? { crtLists: observation.crtLists } : {}),
	});
	const plan = planEndpoint({
		verdicts,
		desired: new Map(job.desired.map((d) => [d.certificate.name, d.certificate])),
		refs: new Map(observation.refs.map((r) => [r.ref, r])),
		runtimeNameFor: (ref) => runtimeNameOf(job.storageDir, ref),
		...(job.newCertificateCrtList ? { newCertificateCrtList: job.newCertificateCrtList } : {}),
		...(job.newCertificateDirDefault ? { newCertificateDirDefault: true } : {}),
		legacyDuplicates: job.policy.legacyDuplicates,
		...(observation.crtLists ? { crtLists: new Map(observation.crtLists.map((l) => [l.name, l])) } : {}),
		served,
		reinserts: job.driver.reinserts === true,
	});
	return { verdicts, ...withoutHeld(plan, job.holds) };
}

/** The plan without the steps of held certificates (nor the reloads they would need), and those steps apart. */
export function withoutHeld(
	plan: Plan,
	holds: ReadonlyMap<string, HeldView> | undefined,
): { plan: Plan; held: HeldStep[] } {
	if (holds === undefined || holds.size === 0) return { plan, held: [] };
	const holdOf = (certificate: string | undefined) =>
		certificate === undefined ? undefined : holds.get(certificate);
	const held: HeldStep[] = [];
	const steps = plan.steps.filter((step) => {
		const hold = holdOf("certificate" in step.action ? step.action.certificate : undefined);
		if (hold) held.push({ step, hold });
		return hold === undefined;
	});
	const reloadNeeds = plan.reloadNeeds.filter((n) => holdOf(n.certificate) === undefined);
	return { plan: { ...plan, steps, reloadNeeds }, held };
}

/** A held step as the report shows it: skipped in sync, planned (no result) in plan, with the hold's reason. */
export function heldView(
	action: HaproxyAction,
	why: string,
	hold: HeldView,
	mode: EndpointJob["mode"],
): StepView {
	const view = viewAction(action, why);
	if (mode === "sync") view.result = "skipped";
	view.note = `${hold.code}: ${hold.message}`;
	return view;
}

/**
 * Names this cycle's writes hand to another ref, reported before the write (cleared by settleVerdicts if served
 * right); where no probe shows who serves a name, the plan's handover says more than the observation.
 */
export function mergeShadowed(verdicts: readonly Verdict[], plan: Plan, probed: boolean): Verdict[] {
	const handedOver = new Set(plan.shadowed.map((p) => p.sni));
	const classified = verdicts.filter((v) => v.class !== "shadowed" || probed || !handedOver.has(v.sni));
	return [
		...classified,
		...plan.shadowed.filter((p) => !classified.some((v) => v.class === "shadowed" && v.sni === p.sni)),
	];
}

/** After the writes: a name they fixed is no longer shadowed, and a duplicate the configuration kept is pinned. */
export function settleVerdicts(
	verdicts: readonly Verdict[],
	served: Probed,
	pinned: ReadonlyMap<string, string>,
): Verdict[] {
	const fixed = new Set(served.filter((s) => s.view.match).map((s) => s.view.sni));
	return verdicts.filter((v) => v.class !== "shadowed" || !fixed.has(v.sni)).map((v) => asPinned(v, pinned));
}

/** A duplicate whose removal the configuration refused becomes a pinned verdict. */
export function asPinned(v: Verdict, pinned: ReadonlyMap<string, string>): Verdict {
	if (v.class !== "legacy-duplicate" && v.class !== "deleted-pending-reload") return v;
	const why = pinned.get(v.ref);
	if (why === undefined) return v;
	const staleSides: Side[] =
		v.class === "legacy-duplicate" ? v.staleSides : v.runtimeStale ? ["runtime"] : [];
	return { class: "pinned", ref: v.ref, certificate: v.certificate, keeper: v.keeper, staleSides, why };
}
