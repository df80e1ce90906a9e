/**
 * Is the HAProxy worker observed still the one answering? A cycle decides from one observation, and HAProxy can
 * reload or die under it: HAProxy 3.2.0's watchdog kills a worker whose CLI spins and its master follows it
 * (issue 23), while a picture of the dead process would say converged. endpoint.ts asks these before the
 * verdict, redo-step.ts after the writes.
 */
import { CertificateeError, describeError } from "../../../errors.js";
import type { EndpointDriver, EndpointObservation } from "./model.js";
import { sameWorker, workerFromInfo } from "./writers.js";

/** What of an endpoint's job a look at its worker needs. */
export interface LookJob {
	driver: EndpointDriver;
	signal: AbortSignal;
	now: () => Date;
	/** desiredKey() of the cycle's desired set, passed to each observation. */
	desiredKey?: string;
}

export type Observed = Extract<EndpointObservation, { ok: true }>;

/** observe() as a value: a throw becomes the endpoint's failure. */
export async function observeSafely(
	job: Pick<LookJob, "driver" | "signal" | "desiredKey">,
): Promise<EndpointObservation> {
	const look = job.desiredKey === undefined ? undefined : { desired: job.desiredKey };
	return job.driver.observe(job.signal, look).catch(
		(e: unknown) =>
			({
				endpoint: job.driver.name,
				ok: false,
				error:
					e instanceof CertificateeError
						? e
						: new CertificateeError("ENDPOINT_ERROR", describeError(e), {
								context: { endpoint: job.driver.name },
							}),
			}) as const,
	);
}

/**
 * Phase 1 on a worker still alive once observed: after the observation and `probe` (the probes), the worker is
 * asked again (`worker()`, one `show info` or `GET …/runtime/info`): gone, the endpoint fails; another one (a
 * reload since), it is observed again, at most `passes` times. A driver that cannot name its worker alone is
 * not asked (then its writes show a dead endpoint).
 */
export async function observeLive<P>(
	job: LookJob,
	probe: () => Promise<P>,
	passes: number,
): Promise<{ ok: true; observation: Observed; served: P } | { ok: false; error: CertificateeError }> {
	for (let pass = 1; ; pass++) {
		const observation = await observeSafely(job);
		if (!observation.ok) return observation;
		const served = await probe();
		const was = workerFromInfo(observation.info, observation.observedAt);
		if (was === undefined || job.driver.worker === undefined || job.signal.aborted) {
			return { ok: true, observation, served };
		}
		const asked = await askWorker(job.driver);
		if (!asked.ok)
			return { ok: false, error: workerGone(job, was.pid, asked.error, "since it was observed") };
		const now = workerFromInfo(asked.info, job.now());
		if (now === undefined || sameWorker(was, now)) return { ok: true, observation, served };
		if (pass >= passes) {
			return {
				ok: false,
				error: new CertificateeError(
					"RUNTIME_RELOADED",
					`HAProxy on ${job.driver.name} changed worker during each of ${pass} observations (last ${was.pid} -> ${now.pid})`,
					{
						context: { endpoint: job.driver.name },
						retryable: true,
						hint: "HAProxy keeps reloading: the next cycle observes it again",
					},
				),
			};
		}
	}
}

/**
 * After the writes: observes again and compares the worker with the one observed before them. Undefined when
 * it is the same worker, or when the driver does not say which worker answered (nothing to compare). A driver
 * that can name its worker alone (`worker()`) is observed again only when that worker changed.
 */
export async function workerChange(
	job: LookJob,
	before: Observed,
): Promise<{ from: number; to: number | "?"; again: EndpointObservation } | undefined> {
	const was = workerFromInfo(before.info, before.observedAt);
	if (was === undefined) return undefined;
	const asked = job.driver.worker ? await askWorker(job.driver) : undefined;
	const answered = asked?.ok ? workerFromInfo(asked.info, job.now()) : undefined;
	if (answered !== undefined && sameWorker(was, answered)) return undefined;
	const again = await observeSafely(job);
	if (!again.ok) return { from: was.pid, to: "?", again };
	const now = workerFromInfo(again.info, again.observedAt);
	if (now === undefined || sameWorker(was, now)) return undefined;
	return { from: was.pid, to: now.pid, again };
}

async function askWorker(
	driver: EndpointDriver,
): Promise<{ ok: true; info: Record<string, string> } | { ok: false; error: unknown }> {
	try {
		return { ok: true, info: await (driver.worker as NonNullable<EndpointDriver["worker"]>)() };
	} catch (error) {
		return { ok: false, error };
	}
}

/** The error of an endpoint whose observed worker no longer answers (and no other worker does). */
export function workerGone(
	job: Pick<LookJob, "driver">,
	pid: number,
	cause: unknown,
	when: string,
): CertificateeError {
	return new CertificateeError(
		"ENDPOINT_UNAVAILABLE",
		`HAProxy on ${job.driver.name} no longer answers ${when} (worker ${pid}): ${describeError(cause)}`,
		{
			context: { endpoint: job.driver.name },
			retryable: true,
			hint: "HAProxy stopped or its worker died (see its log: a watchdog abort, an OOM kill): start it again; the next cycle observes it and writes what it lacks",
		},
	);
}
