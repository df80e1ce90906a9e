/** The `haproxy-runtime` kind as a target: its one node, run by the HAProxy engine (targets/haproxy/engine/). */
import { loadTrustStore } from "../../certificates/trust.js";
import { storageDirName } from "../../reconcile/model.js";
import { createFleetRunner } from "../haproxy/engine/fleet.js";
import { createWriteQueues, socketKey } from "../haproxy/engine/writers.js";
import type { TargetFactory } from "../types.js";
import { createRuntimeEndpoint } from "./index.js";

export const runtimeTarget: TargetFactory<"haproxy-runtime"> = (config, deps) => {
	const endpoint = createRuntimeEndpoint(config, {
		now: deps.now,
		...(deps.readOnly ? { readOnly: true } : {}),
	});
	const dirName = storageDirName(config.crt_dir_name ?? config.crt_dir);
	return {
		...createFleetRunner({
			name: config.name,
			kind: config.type,
			endpoints: [endpoint],
			policy: {
				legacyDuplicates: config.legacy_duplicates,
				allowNameRemoval: config.allow_name_removal,
				...(deps.neverDowngrade ? { neverDowngrade: true } : {}),
			},
			storageDir: dirName,
			newCertificateCrtList: config.crt_list ?? dirName,
			...(config.crt_list === undefined ? { newCertificateDirDefault: true } : {}),
			...(config.certificates ? { certificates: config.certificates } : {}),
			writers: {
				queues: deps.writeQueues ?? createWriteQueues(),
				addressOf: () => socketKey(config.socket),
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
		close: () => endpoint.close(),
	};
};
