/**
 * The desired set of one cycle: every source's certificates plus those the renewal manager holds (ordering
 * what is due first, unless `order` is false as in `plan`). A name served twice keeps its first provider
 * (sources in config order, then certificates[]) and the other is reported. No source's failure stops the rest.
 */
import { CertificateeError, describeError, isCertificateeError } from "../errors.js";
import type { DesiredCertificate, DesiredSet, SourceProblem } from "../reconcile/model.js";
import { type RenewalDeps, runRenewal } from "../renewal/manager.js";
import { type RenewalStatus, renewalView } from "../renewal/status.js";
import type { Source, SourceResult } from "../sources/types.js";
import { type Replacement, readReplacements } from "../store/records.js";
import type { StateStore } from "../store/types.js";

export interface DesiredLoaderDeps {
	sources: readonly Source[];
	/** Where deliberate replacements are recorded (`certificatee replace`): each one marks its certificate. */
	replacements?: StateStore;
	renewal?: RenewalDeps;
	now: () => Date;
	random?: () => number;
}

export interface LoadedDesired extends DesiredSet {
	renewal: RenewalStatus[];
}

export function createDesiredLoader(
	deps: DesiredLoaderDeps,
	/** `order` false as in `plan`; a function is asked each cycle (in a cluster, only the leader orders). */
	options: { order: boolean | (() => boolean) },
): (signal: AbortSignal) => Promise<LoadedDesired> {
	return async (signal) => {
		const order = typeof options.order === "function" ? options.order() : options.order;
		const [loaded, renewal] = await Promise.all([
			Promise.all(deps.sources.map((s) => loadSafely(s, signal))),
			deps.renewal
				? runRenewal(deps.renewal, {
						now: deps.now(),
						random: deps.random ?? Math.random,
						signal,
						dryRun: !order,
					})
				: undefined,
		]);
		const problems: SourceProblem[] = [...loaded.flatMap((r) => r.problems), ...(renewal?.problems ?? [])];
		const byName = new Map<string, DesiredCertificate>();
		for (const c of [...loaded.flatMap((r) => r.certificates), ...(renewal?.certificates ?? [])]) {
			const first = byName.get(c.name);
			if (!first) {
				byName.set(c.name, c);
				continue;
			}
			problems.push({
				subject: c.origin,
				error: new CertificateeError(
					"SOURCE_DUPLICATE_NAME",
					`certificate "${c.name}" comes from both ${first.origin} and ${c.origin}; the first is kept`,
					{ context: { certificate: c.name }, hint: "give each certificate a unique name" },
				),
			});
		}
		const statuses = renewal?.statuses ?? [];
		const certificates = deps.replacements
			? await markReplacements([...byName.values()], deps.replacements, problems)
			: [...byName.values()];
		return {
			certificates,
			problems,
			renewal: statuses,
			...(deps.renewal ? { renewals: statuses.map(renewalView) } : {}),
		};
	};
}

/** Each certificate an operator chose as a deliberate replacement (the same fingerprint) carries it. */
async function markReplacements(
	certificates: DesiredCertificate[],
	store: StateStore,
	problems: SourceProblem[],
): Promise<DesiredCertificate[]> {
	let replacements: Map<string, Replacement>;
	try {
		replacements = await readReplacements(store);
	} catch (e) {
		const error = isCertificateeError(e)
			? e
			: new CertificateeError("STATE_CORRUPT", `deliberate replacements unreadable: ${describeError(e)}`);
		problems.push({ subject: "replacements", error });
		return certificates;
	}
	return certificates.map((c) => {
		const r = replacements.get(c.name);
		if (r === undefined || r.fingerprint !== c.bundle.leaf.fingerprint) return c;
		return {
			...c,
			replacement: {
				reason: r.reason,
				by: r.by,
				requestedAt: r.requestedAt,
				...(r.replaces ? { replaces: r.replaces } : {}),
			},
		};
	});
}

async function loadSafely(source: Source, signal: AbortSignal): Promise<SourceResult> {
	try {
		return await source.load(signal);
	} catch (e) {
		const error = new CertificateeError("SOURCE_UNREADABLE", `source "${source.name}": ${describeError(e)}`, {
			context: { operation: "load source" },
			retryable: true,
			cause: e,
		});
		return { certificates: [], problems: [{ subject: source.name, error }] };
	}
}
