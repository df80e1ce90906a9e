/**
 * The desired set of one cycle: every source's certificates plus those the renewal manager holds (ordering
 * what is due first, unless `order` is false as in `plan`). A name served twice keeps its first provider
 * (sources in config order, then certificates[]) and the other is reported. No source's failure stops the rest.
 */
import { CertificateeError, describeError } from "../errors.js";
import type { DesiredCertificate, DesiredSet, RenewalView, SourceProblem } from "../reconcile/model.js";
import { type CertificateStatus, type RenewalDeps, runRenewal } from "../renewal/manager.js";
import type { Source, SourceResult } from "../sources/types.js";

export interface DesiredLoaderDeps {
	sources: readonly Source[];
	renewal?: RenewalDeps;
	now: () => Date;
	random?: () => number;
}

export interface LoadedDesired extends DesiredSet {
	renewal: CertificateStatus[];
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
		return {
			certificates: [...byName.values()],
			problems,
			renewal: statuses,
			...(deps.renewal ? { renewals: statuses.map(renewalView) } : {}),
		};
	};
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

function renewalView(s: CertificateStatus): RenewalView {
	return {
		certificate: s.name,
		issuer: s.issuer,
		names: s.domains,
		state: s.state,
		...(s.ordered
			? {
					order: {
						result: s.lastError && s.failures > 0 ? "failed" : "ok",
						reason: s.orderedBecause?.reason ?? "",
						message: s.orderedBecause?.message ?? "",
					},
				}
			: {}),
		nextAttemptAt: s.nextRenewalAt,
		reason: s.decision.reason,
		message: s.decision.message,
		failures: s.failures,
		...(s.lastError ? { lastError: s.lastError } : {}),
		...(s.serial ? { serial: s.serial } : {}),
		...(s.notAfter ? { notAfter: s.notAfter } : {}),
		...(s.profile ? { profile: s.profile } : {}),
	};
}
