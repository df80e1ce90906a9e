/**
 * The daemon's side of `renew` and `revoke` while it runs (store/requests.ts): before a cycle, take every
 * request waiting, apply it to the renewal state (a revocation first goes to the issuer), and answer `taken`;
 * after the cycle, answer each with what the cycle did for its certificate (`answerFor`, pure).
 */
import { CertificateeError, describeError, isCertificateeError } from "../errors.js";
import type { Logger } from "../log.js";
import { certificateOnEndpoint } from "../reconcile/convergence.js";
import type { CycleReport } from "../reconcile/report.js";
import { requestRenewal, revokeLatest } from "../renewal/request.js";
import { type Issuer, REVOCATION_REASONS, type RevocationReason } from "../sources/types.js";
import { writeReplacement } from "../store/records.js";
import {
	announceDaemon,
	type OperatorRequest,
	type RequestAnswer,
	removeOldAnswers,
	takeRequests,
	watchRequests,
	writeAnswer,
} from "../store/requests.js";
import type { StateStore } from "../store/types.js";
import { REPLACEMENT_RECORDED, replacementAudit } from "./summary.js";

export interface RequestDeskDeps {
	stateDir: string;
	store: StateStore;
	issuers: ReadonlyMap<string, Issuer>;
	/** The configured issued certificates (a request for another name is answered failed). */
	certificates: readonly string[];
	maxOrdersPerDay?: number;
	log: Logger;
	now: () => Date;
}

/** How a cycle ended, for the requests it carried. */
export type CycleEnd = { report: CycleReport } | { error: unknown };

export interface RequestDesk {
	/** Takes the requests waiting; the returned function answers them once the cycle ended. */
	begin(signal: AbortSignal): Promise<(end: CycleEnd) => Promise<void>>;
	watch(wake: () => void): () => void;
}

export async function openRequestDesk(deps: RequestDeskDeps): Promise<RequestDesk> {
	await announceDaemon(deps.stateDir);
	await removeOldAnswers(deps.stateDir, deps.now());
	const answer = async (a: RequestAnswer) => {
		try {
			await writeAnswer(deps.stateDir, a);
		} catch (e) {
			deps.log.warn({ request: a.id, error: describeError(e) }, "could not answer an operator request");
		}
	};
	return {
		watch: (wake) => watchRequests(deps.stateDir, wake),
		async begin(signal) {
			let taken: Awaited<ReturnType<typeof takeRequests>>;
			try {
				taken = await takeRequests(deps.stateDir, deps.now());
			} catch (e) {
				// The cycle runs anyway; the requests wait for the next one.
				deps.log.warn({ error: describeError(e) }, "could not read operator requests");
				return async () => undefined;
			}
			const { requests, dropped } = taken;
			for (const d of dropped) deps.log.warn({ file: d.file, why: d.why }, "operator request dropped");
			const carried: Array<{ request: OperatorRequest; takenAt: Date }> = [];
			for (const request of requests) {
				const takenAt = deps.now();
				const base = { id: request.id, takenAt: takenAt.toISOString(), pid: process.pid };
				try {
					await apply(deps, request, signal);
				} catch (e) {
					const error = isCertificateeError(e)
						? e
						: new CertificateeError("INTERNAL", describeError(e), {
								context: { certificate: request.certificate },
							});
					deps.log.warn(
						{ certificate: request.certificate, request: request.id, code: error.code, error: error.message },
						`operator ${request.kind} refused`,
					);
					await answer({
						...base,
						state: "failed",
						at: deps.now().toISOString(),
						message: error.message,
						error: { code: error.code, message: error.message, ...(error.hint ? { hint: error.hint } : {}) },
					});
					continue;
				}
				deps.log.info(
					{ certificate: request.certificate, request: request.id, force: request.force, kind: request.kind },
					`operator ${request.kind} taken: ordering in this cycle`,
				);
				await answer({
					...base,
					state: "taken",
					at: takenAt.toISOString(),
					message: "ordering in this cycle",
				});
				carried.push({ request, takenAt });
			}
			return async (end) => {
				for (const { request, takenAt } of carried) {
					const a = answerFor(request, takenAt, end, deps.now(), process.pid);
					deps.log.info(
						{ certificate: request.certificate, request: request.id, state: a.state, serial: a.serial },
						`operator ${request.kind} ${a.state}: ${a.message}`,
					);
					await answer(a);
				}
			};
		},
	};
}

async function apply(deps: RequestDeskDeps, request: OperatorRequest, signal: AbortSignal): Promise<void> {
	const name = request.certificate;
	if (request.kind === "replace") {
		if (request.replacement?.certificate !== name) {
			throw new CertificateeError("CONFIG_INVALID", `replace request for "${name}" without its replacement`, {
				context: { certificate: name },
			});
		}
		await writeReplacement(deps.store, request.replacement);
		deps.log.info(replacementAudit(request.replacement), REPLACEMENT_RECORDED);
		return;
	}
	if (!deps.certificates.includes(name)) {
		throw new CertificateeError("CONFIG_INVALID", `the running daemon has no certificate named "${name}"`, {
			context: { certificate: name, field: "certificates" },
			hint: `its configuration lists: ${deps.certificates.join(", ") || "none"}; send SIGHUP after changing the file`,
		});
	}
	if (request.kind === "revoke") {
		const reason = (request.reason ?? "unspecified") as RevocationReason;
		if (!(reason in REVOCATION_REASONS)) {
			throw new CertificateeError("CONFIG_INVALID", `unknown revocation reason "${reason}"`, {
				context: { field: "--reason" },
			});
		}
		const revoked = await revokeLatest(
			deps.store,
			deps.issuers,
			name,
			reason,
			AbortSignal.any([signal, AbortSignal.timeout(120_000)]),
		);
		deps.log.info({ certificate: name, ...revoked, reason }, "certificate revoked");
	}
	await requestRenewal(deps.store, name, {
		force: request.force || request.kind === "revoke",
		now: deps.now(),
		...(deps.maxOrdersPerDay === undefined ? {} : { maxOrdersPerDay: deps.maxOrdersPerDay }),
	});
}

/**
 * What a finished cycle did for a request's certificate: `served` when its order succeeded and every endpoint
 * that carries it converged; else `failed`, saying where it stopped (the order, or which endpoints and why).
 */
export function answerFor(
	request: OperatorRequest,
	takenAt: Date,
	end: CycleEnd,
	now: Date,
	pid: number,
): RequestAnswer {
	const base = { id: request.id, takenAt: takenAt.toISOString(), at: now.toISOString(), pid };
	if ("error" in end) {
		const code = isCertificateeError(end.error) ? end.error.code : "INTERNAL";
		const message = `the cycle could not run: ${describeError(end.error)}`;
		return {
			...base,
			state: "failed",
			message,
			error: { code, message, hint: "the daemon orders it at its next cycle; certificatee status shows it" },
		};
	}
	if (request.kind === "replace") return answerForReplacement(request, base, end.report);
	const renewal = end.report.renewals?.find((r) => r.certificate === request.certificate);
	if (!renewal?.order) {
		const message = `not ordered: ${renewal?.message ?? "the certificate is not in the cycle's renewals"}`;
		return { ...base, state: "failed", message, error: { code: "ISSUE_FAILED", message } };
	}
	if (renewal.order.result === "failed") {
		const error = renewal.lastError ?? { code: "ISSUE_FAILED", message: renewal.order.message };
		return {
			...base,
			state: "failed",
			message: `order failed: ${error.code}: ${error.message}`,
			error: { code: error.code, message: error.message, ...(error.hint ? { hint: error.hint } : {}) },
		};
	}
	const endpoints = endpointsOf(end.report, request.certificate);
	return servedOrBehind(base, renewal.serial, endpoints, "ordered, ");
}

/**
 * `served` when every endpoint that carries the certificate converged on `serial`; else `failed`, naming each
 * endpoint behind and why.
 */
function servedOrBehind(
	base: Pick<RequestAnswer, "id" | "takenAt" | "at" | "pid">,
	serialText: string | undefined,
	endpoints: NonNullable<RequestAnswer["endpoints"]>,
	done: string,
): RequestAnswer {
	const serial = serialText ? { serial: serialText } : {};
	const behind = endpoints.filter((e) => !e.converged);
	const where = `${endpoints.length - behind.length}/${endpoints.length} endpoint${endpoints.length === 1 ? "" : "s"}`;
	if (behind.length === 0)
		return {
			...base,
			...serial,
			state: "served",
			endpoints,
			message: `serial ${serialText ?? "?"} served on ${where}`,
		};
	const message = `serial ${serialText ?? "?"} ${done}served on ${where}: ${behind.map((e) => `${e.endpoint}: ${e.reason ?? "not converged"}`).join("; ")}`;
	return {
		...base,
		...serial,
		state: "failed",
		endpoints,
		message,
		error: {
			code: "NOT_AVAILABLE",
			message,
			hint: "the daemon keeps pushing it every cycle; certificatee status shows each endpoint",
		},
	};
}

/** Per endpoint that carries the certificate: converged, or why not. */
function endpointsOf(report: CycleReport, certificate: string): NonNullable<RequestAnswer["endpoints"]> {
	return report.targets.flatMap((t) =>
		t.endpoints.flatMap((e) => {
			const on = certificateOnEndpoint(e, certificate);
			if (on === undefined) return [];
			return [
				{
					target: t.target,
					endpoint: e.endpoint,
					converged: on.converged,
					...(on.reason ? { reason: on.reason } : {}),
				},
			];
		}),
	);
}

/**
 * A deliberate replacement is `served` once the cycle's desired certificate is the replacement and every endpoint
 * that carries it converged; else `failed`, saying why (its source does not serve it, or where it stopped).
 */
function answerForReplacement(
	request: OperatorRequest,
	base: Pick<RequestAnswer, "id" | "takenAt" | "at" | "pid">,
	report: CycleReport,
): RequestAnswer {
	const want = request.replacement;
	const desired = report.certificates.find((c) => c.name === request.certificate);
	const serial = want ? { serial: want.serial } : {};
	if (!want || desired?.serial !== want.serial) {
		const message = desired
			? `the desired certificate of "${request.certificate}" is serial ${desired.serial}, not the replacement (serial ${want?.serial ?? "?"}): its source does not hold it`
			: `no source serves "${request.certificate}" this cycle`;
		return {
			...base,
			...serial,
			state: "failed",
			message,
			error: {
				code: "NOT_AVAILABLE",
				message,
				hint: "put the replacement in the certificate's source file (the record stays: it is honoured as soon as the source holds it)",
			},
		};
	}
	return servedOrBehind(base, want.serial, endpointsOf(report, request.certificate), "");
}
