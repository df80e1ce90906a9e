/** The `haproxy-dataplane` kind as a target: its endpoints, run by the HAProxy engine (targets/haproxy/engine/). */
import { storageDirName } from "../haproxy/engine/model.js";
import { haproxyTarget } from "../haproxy/engine/target.js";
import { apiKey } from "../haproxy/engine/writers.js";
import type { TargetFactory } from "../types.js";
import { createDataplaneEndpoint } from "./index.js";

export const dataplaneTarget: TargetFactory<"haproxy-dataplane"> = (config, deps) => {
	const endpoints = config.endpoints.map((e, index) =>
		createDataplaneEndpoint(e, {
			now: deps.now,
			allowNameRemoval: config.allow_name_removal,
			storageDir: config.storage_dir,
			bufsize: config.bufsize,
			// In a cluster (never downgrade on) other members write the same endpoints: a listing that names the same
			// items proves nothing about their content there, so every observation is full.
			fullObservationEvery: deps.neverDowngrade ? 1 : config.full_observation_every,
			place: { index, count: config.endpoints.length },
			...(deps.warn ? { warn: deps.warn } : {}),
		}),
	);
	const urls = new Map(config.endpoints.map((e) => [e.name, apiKey(e.url)]));
	return haproxyTarget(config, deps, {
		endpoints,
		storageDir: storageDirName(config.storage_dir),
		...(config.crt_list ? { newCertificateCrtList: config.crt_list } : {}),
		addressOf: (endpoint) => urls.get(endpoint) ?? `endpoint:${endpoint}`,
		close: async () => {
			await Promise.all(endpoints.map((e) => e.close()));
		},
	});
};
