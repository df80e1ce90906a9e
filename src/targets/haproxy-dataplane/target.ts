/** The `haproxy-dataplane` kind as a target: its endpoints, run by the HAProxy engine (targets/haproxy/engine/). */
import { loadTrustStore } from "../../certificates/trust.js";
import { storageDirName } from "../../reconcile/model.js";
import { createFleetRunner } from "../haproxy/engine/fleet.js";
import { apiKey, createWriteQueues } from "../haproxy/engine/writers.js";
import type { TargetFactory } from "../types.js";
import { createDataplaneEndpoint } from "./index.js";

export const dataplaneTarget: TargetFactory<"haproxy-dataplane"> = (config, deps) => {
	const endpoints = config.endpoints.map((e) =>
		createDataplaneEndpoint(e, {
			now: deps.now,
			allowNameRemoval: config.allow_name_removal,
			storageDir: config.storage_dir,
			bufsize: config.bufsize,
			fullObservationEvery: config.full_observation_every,
			...(deps.warn ? { warn: deps.warn } : {}),
		}),
	);
	const urls = new Map(config.endpoints.map((e) => [e.name, apiKey(e.url)]));
	return {
		...createFleetRunner({
			name: config.name,
			kind: config.type,
			endpoints,
			policy: {
				legacyDuplicates: config.legacy_duplicates,
				allowNameRemoval: config.allow_name_removal,
				...(deps.neverDowngrade ? { neverDowngrade: true } : {}),
			},
			storageDir: storageDirName(config.storage_dir),
			...(config.crt_list ? { newCertificateCrtList: config.crt_list } : {}),
			...(config.certificates ? { certificates: config.certificates } : {}),
			...(deps.endpointConcurrency ? { concurrency: deps.endpointConcurrency } : {}),
			writers: {
				queues: deps.writeQueues ?? createWriteQueues(),
				addressOf: (endpoint) => urls.get(endpoint) ?? `endpoint:${endpoint}`,
			},
			...(deps.memory ? { memory: deps.memory(config.name) } : {}),
			...(deps.backoff === false ? { backoff: false } : {}),
			...(deps.owns ? { owns: (endpoint: string) => deps.owns!(config.name, endpoint) } : {}),
			reloads: { maxPerHour: config.reloads.max_per_hour },
			...(config.trust_store
				? { trust: loadTrustStore(config.trust_store, `targets.${config.name}.trust_store`) }
				: {}),
			...(deps.certificateTrust ? { certificateTrust: deps.certificateTrust } : {}),
			endpointDeadlineMs: config.endpoint_deadline,
			now: deps.now,
		}),
		close: async () => {
			await Promise.all(endpoints.map((e) => e.close()));
		},
	};
};
