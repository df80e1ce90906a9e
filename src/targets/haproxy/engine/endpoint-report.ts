/** What an endpoint's cycle reports: its verdicts and steps, the holds and canary checks, the audit, the refs. */
import { auditServed } from "../../../reconcile/audit.js";
import type { EndpointReport, HeldView, StepView } from "../../../reconcile/report.js";
import { verifyCanary } from "../../../reconcile/rollout-checks.js";
import type { CheckResult } from "../../../reconcile/rollout-view.js";
import { auditSteps, observedSerial } from "./audit.js";
import type { Plan } from "./endpoint-decide.js";
import type { EndpointJob, EndpointState, Probed } from "./endpoint-state.js";
import type { Observed } from "./liveness.js";

/** The report of an endpoint observed `before` and left in `state`. */
export function endpointReport(
	job: EndpointJob,
	cycle: {
		before: { observation: Observed; served: Probed };
		plan: Plan;
		heldSteps: StepView[];
		checks: CheckResult[];
		state: EndpointState;
		durationMs: number;
	},
): EndpointReport {
	const { plan, heldSteps, checks, state } = cycle;
	const audit = job.mode === "sync" ? auditOf(job, cycle.before, state) : [];
	return {
		target: job.target,
		endpoint: job.driver.name,
		ok: true,
		verdicts: state.verdicts,
		steps: [...state.steps, ...heldSteps],
		notes: state.notes,
		...heldReport(job, heldSteps, checks),
		...(checks.length > 0 ? { rolloutChecks: checks } : {}),
		...(audit.length > 0 ? { audit } : {}),
		...(plan.servingAfter.length > 0 ? { servingAfter: plan.servingAfter } : {}),
		...crtListProblems(state.observation),
		...(state.reloads ? { reloads: state.reloads } : {}),
		served: state.served.map((s) => s.view),
		refs: refsView(state),
		durationMs: cycle.durationMs,
	};
}

/** sync: every write and removal done, against what was observed before, and every served change. */
function auditOf(
	job: EndpointJob,
	before: { observation: Observed; served: Probed },
	state: EndpointState,
): NonNullable<EndpointReport["audit"]> {
	const where = { target: job.target, endpoint: job.driver.name };
	return [
		...auditSteps(where, state.steps, observedSerial(before.observation.refs)),
		...auditServed(
			where,
			before.served.map((s) => s.view),
			state.served.map((s) => s.view),
		),
	];
}

/** Every ref observed, with its class (unmanaged when no verdict names it) and expiry. */
function refsView(state: EndpointState): EndpointReport["refs"] {
	const classByRef = new Map<string, EndpointReport["refs"][number]["class"]>();
	for (const v of state.verdicts) if ("ref" in v) classByRef.set(v.ref, v.class);
	return state.observation.refs.map((r) => {
		const notAfter = r.runtime?.notAfter ?? r.storage?.notAfter;
		return {
			ref: r.ref,
			class: classByRef.get(r.ref) ?? "unmanaged",
			...(notAfter ? { notAfter: notAfter.toISOString() } : {}),
		};
	});
}

/** The holds the report carries: a trust failure always (a chain that does not verify is wrong wherever it is), a
 * rollout's only where it held a write back. */
function heldReport(
	job: EndpointJob,
	heldSteps: readonly StepView[],
	checks: readonly CheckResult[],
): { held?: HeldView[] } {
	const carried = new Set(job.desired.map((d) => d.certificate.name));
	const withSteps = new Set(heldSteps.map((s) => s.certificate));
	const held = [...(job.holds?.values() ?? [])].filter(
		(h) => carried.has(h.certificate) && (h.failed || withSteps.has(h.certificate)),
	);
	// A canary whose check failed: the rollout halts here, a failure of this endpoint naming the check.
	const reported = new Set<string>();
	for (const c of checks) {
		if (c.ok || reported.has(c.certificate)) continue;
		reported.add(c.certificate);
		held.push({
			certificate: c.certificate,
			kind: "rollout",
			code: c.code ?? "ROLLOUT_CHECK_FAILED",
			message: `rollout halted: the ${c.check} check failed on this canary: ${c.message ?? ""}; the other endpoints keep the certificate they serve`,
			...(c.hint ? { hint: c.hint } : {}),
			failed: true,
		});
	}
	return held.length > 0 ? { held } : {};
}

/** The rollout's checks of each certificate this canary verifies, once its writes are done. */
export async function verifyCanaries(job: EndpointJob): Promise<CheckResult[]> {
	if (job.verify === undefined || job.verify.size === 0 || job.signal.aborted) return [];
	const desired = job.desired.map((d) => d.certificate);
	const probe = job.driver.probe?.bind(job.driver);
	const out: CheckResult[] = [];
	for (const [name, spec] of job.verify) {
		const certificate = desired.find((d) => d.name === name);
		if (certificate === undefined || job.holds?.has(name)) continue;
		out.push(
			...(await verifyCanary({
				endpoint: `${job.target}/${job.driver.name}`,
				certificate,
				desired,
				spec,
				probe,
				signal: job.signal,
				now: job.now(),
			})),
		);
	}
	return out;
}

/** The crt-list lines the observation found naming missing files (reported as failures: see report.ts). */
function crtListProblems(observation: Observed): { crtListProblems?: EndpointReport["crtListProblems"] } {
	const problems = (observation.crtLists ?? []).flatMap((l) =>
		(l.unresolved ?? []).map((u) => ({ crtList: l.name, line: u.line, file: u.file })),
	);
	return problems.length > 0 ? { crtListProblems: problems } : {};
}
