/**
 * The `haproxy-dataplane` target: one EndpointDriver per Data Plane API server. observe() reads storage,
 * runtime and crt-lists in full before anything is decided; apply() performs one action and reports what
 * happened; probe() shakes hands with HAProxy's TLS port by SNI when the endpoint has a `probe` address.
 */

import { combinedPem } from "../../certificates/index.js";
import { CertificateeError, isCertificateeError } from "../../errors.js";
import { probeServed } from "../../probe/index.js";
import { fullPhase, observationKind, type Place, sinceFullAfter } from "../haproxy/engine/full-schedule.js";
import type { EndpointDriver, EndpointObservation, ObserveLook } from "../haproxy/engine/model.js";
import { workerFromInfo } from "../haproxy/engine/writers.js";
import { applyAction } from "./apply.js";
import { type ClientDeps, createDataplaneClient, type DataplaneClientHandle } from "./client.js";
import { fullBecause, intern, noteWrite, type ObservationMemory, reusable, untouched } from "./memory.js";
import { observeEndpoint } from "./observe.js";
import type { DataplaneEndpointConfig } from "./schema.js";
import { onLoopback, settledWorkerInfo } from "./settle.js";

export { sanitizeStorageName } from "./client.js";
export {
	type DataplaneEndpointConfig,
	type DataplaneTargetConfig,
	dataplaneEndpointSchema,
	dataplaneTargetSchema,
} from "./schema.js";

export interface DataplaneEndpointDeps extends ClientDeps {
	now(): Date;
	/** The target's allow_name_removal (default false). */
	allowNameRemoval?: boolean;
	/** GETs in flight during observe(). Default 16. */
	concurrency?: number;
	/** The target's storage_dir as haproxy.cfg spells it: the crt directory whose members the API cannot list. */
	storageDir?: string;
	/** HAProxy's tune.bufsize (default 16384). */
	bufsize?: number;
	/** Every N-th observation reads every item again; the others reuse what cannot have changed. Default 10. */
	fullObservationEvery?: number;
	/** This endpoint's place among its target's endpoints: where its full-observation schedule starts. */
	place?: Place;
}

export interface DataplaneEndpoint extends EndpointDriver {
	/** Closes the endpoint's connections. */
	close(): Promise<void>;
}

export function createDataplaneEndpoint(
	config: DataplaneEndpointConfig,
	deps: DataplaneEndpointDeps,
): DataplaneEndpoint {
	const client: DataplaneClientHandle = createDataplaneClient(config, deps);
	const endpoint = config.name;
	const concurrency = deps.concurrency ?? 16;
	// The process tree is read where its pids are this host's (the API on loopback), the master CLI included
	// (`master_runtime`): from 3.0 the master, back from re-executing itself, still routes `@1` to the old worker
	// until the new one is ready, so `/runtime/info` alone cannot tell a reload under way (settle.ts).
	const local = onLoopback(config.url);

	const driverProbe = (sni: string, signal: AbortSignal) =>
		probeServed({ address: config.probe ?? "", sni, signal, timeoutMs: config.timeout });

	// Incremental observation (memory.ts): what the last observation read, and what certificatee wrote since.
	let memory: ObservationMemory | undefined;
	let touched = untouched();
	const rules = { every: deps.fullObservationEvery ?? 10, masterRuntime: config.master_runtime === true };
	const phase = fullPhase(deps.place, rules.every);

	async function observe(signal: AbortSignal, look?: ObserveLook): Promise<EndpointObservation> {
		try {
			// The worker first: a reload during the observation then shows as a change at the next look.
			const worker = await workerInfo(signal);
			const observedAt = deps.now();
			const identity = workerFromInfo(worker, observedAt);
			const uptimeSec = Number(worker.uptime_sec);
			const since = touched;
			const sinceFull = memory?.sinceFull;
			let full: string | undefined;
			const [observed, info] = await Promise.all([
				observeEndpoint(
					client,
					{
						concurrency,
						...(deps.storageDir ? { storageDir: deps.storageDir } : {}),
						...(config.probe === undefined ? {} : { probe: driverProbe }),
						reuse: (listing) => {
							full = fullBecause(
								memory,
								since,
								{
									...listing,
									...(identity ? { worker: identity, uptimeSec } : {}),
									...(look?.desired === undefined ? {} : { desired: look.desired }),
								},
								rules,
							);
							return full === undefined && memory ? reusable(memory, since) : undefined;
						},
					},
					signal,
				),
				client.info(signal),
			]);
			const { refs, crtLists, fetched } = observed;
			// Writes during this observation stay noted for the next one; those before it were read now.
			if (touched === since) touched = untouched();
			memory =
				identity === undefined
					? undefined
					: {
							worker: identity,
							uptimeSec,
							storage: new Map(fetched.storage.map((f) => intern(f)).map((f) => [f.storageName, f])),
							runtime: new Map(fetched.runtime.map((r) => intern(r)).map((r) => [r.name, r])),
							crtLists: fetched.crtLists,
							sinceFull: sinceFullAfter(memory?.sinceFull, full, rules.every, phase),
							...(look?.desired === undefined ? {} : { desired: look.desired }),
						};
			const version = info.api?.version;
			const fields = {
				...(version ? { api_version: version } : {}),
				...worker,
				observation: observationKind(full, sinceFull, rules.every),
			};
			return { endpoint, ok: true, refs, crtLists, observedAt, info: fields };
		} catch (e) {
			// A failed observation leaves nothing to trust: the next one is full.
			memory = undefined;
			if (e instanceof CertificateeError && !signal.aborted) return { endpoint, ok: false, error: e };
			throw e;
		}
	}

	/**
	 * pid, uptime_sec and node of the worker the API reaches; none from a server without runtime info. On
	 * loopback, while that worker's master is starting a newer one (a reload under way: the new worker has read
	 * the files, the old one still answers and does not say it is stopping), waits until the new one answers,
	 * so a write the reload lost shows as a worker change (settle.ts).
	 */
	function workerInfo(signal: AbortSignal): Promise<Record<string, string>> {
		return settledWorkerInfo(() => askWorkerInfo(signal), {
			local,
			endpoint,
			timeoutMs: config.timeout,
			signal,
		});
	}

	async function askWorkerInfo(signal: AbortSignal): Promise<Record<string, string>> {
		const answer = await client.processInfo(signal).catch((e: unknown) => {
			if (isCertificateeError(e, "ENDPOINT_NOT_FOUND")) return undefined;
			throw e;
		});
		const info = answer?.info;
		if (typeof info?.pid !== "number" || typeof info.uptime !== "number") return {};
		return {
			pid: String(info.pid),
			uptime_sec: String(info.uptime),
			...(info.node ? { node: info.node } : {}),
		};
	}

	const driver: DataplaneEndpoint = {
		name: endpoint,
		observe,
		apply: async (action, signal) => {
			// Noted before the write too: a write cut off midway leaves the next observation full.
			touched.all ||= action.op !== "storage-replace" && action.op !== "runtime-set";
			const result = await applyAction(
				{
					endpoint,
					client,
					now: deps.now,
					allowNameRemoval: deps.allowNameRemoval ?? false,
					...(deps.bufsize ? { bufsize: deps.bufsize } : {}),
					...(deps.warn ? { warn: deps.warn } : {}),
				},
				action,
				signal,
			).catch((e: unknown) => {
				touched.all = true;
				throw e;
			});
			noteWrite(touched, action, result);
			return result;
		},
		close: () => client.close(),
		reload: async (signal, written) => {
			const carrier = written[0];
			const fail = (message: string, hint: string, cause?: unknown) => ({
				ok: false as const,
				error: new CertificateeError("RELOAD_FAILED", `${endpoint}: ${message}`, {
					context: { endpoint, operation: "reload" },
					hint,
					...(cause === undefined ? {} : { cause }),
				}),
			});
			if (carrier === undefined) return fail("nothing written to reload for", "the next cycle retries");
			touched.all = true;
			try {
				const before = Number((await workerInfo(signal)).pid);
				// The file already holds this content: the PUT changes nothing on disk; force_reload reloads HAProxy.
				await client.storage.forceReload(carrier.ref, combinedPem(carrier.bundle), signal);
				const after = Number((await workerInfo(signal)).pid);
				if (Number.isInteger(before) && before === after) {
					return fail(
						`the Data Plane API answered the forced reload, but worker ${before} still answers`,
						"check the API's reload command (reload-cmd) and HAProxy's log",
					);
				}
				return {
					ok: true,
					...(Number.isInteger(before) ? { from: before } : {}),
					...(Number.isInteger(after) ? { to: after } : {}),
					detail: `reloaded through the Data Plane API (force_reload on ${carrier.ref}): worker ${before || "?"} -> ${after || "?"}`,
				};
			} catch (e) {
				return fail(
					`the forced reload failed: ${e instanceof Error ? e.message : String(e)}`,
					"the API restored haproxy.cfg from its last known good copy; run haproxy -c and see the API's log",
					e,
				);
			}
		},
	};
	if (config.master_runtime) {
		// One GET instead of a second full observation after the writes: the worker it names, settled on the
		// process tree on loopback (settle.ts; from 3.0 `@1` still reaches the old worker for a while after the
		// new one is forked), tells whether a reload lost any of them.
		driver.worker = () => workerInfo(new AbortController().signal);
	}
	const address = config.probe;
	if (address !== undefined) {
		driver.probe = (sni, signal, keyType) =>
			probeServed({ address, sni, signal, timeoutMs: config.timeout, ...(keyType ? { keyType } : {}) });
	}
	return driver;
}
