/**
 * A HAProxy kind as a target: its endpoint drivers run as one fleet by the engine, with the options both
 * HAProxy schemas spell alike. A kind's target.ts gives its drivers, where its storage lives and how new
 * certificates are made live, and the address of the process each endpoint writes to.
 */
import { loadTrustStore } from "../../../certificates/trust.js";
import type { BuiltTarget, TargetDeps } from "../../types.js";
import { createFleetRunner } from "./fleet.js";
import type { EndpointDriver } from "./model.js";
import { createWriteQueues } from "./writers.js";

/** The options of a haproxy-runtime and a haproxy-dataplane target that mean the same. */
export interface HaproxyTargetConfig {
	name: string;
	type: string;
	legacy_duplicates: "remove" | "report";
	allow_name_removal: boolean;
	certificates?: string[] | undefined;
	trust_store?: string | undefined;
	reloads: { max_per_hour: number };
	endpoint_deadline: number;
}

/** What a HAProxy kind adds to the shared options. */
export interface HaproxyTargetParts {
	endpoints: readonly EndpointDriver[];
	/** The directory HAProxy loads storage files from, as HAProxy names them. */
	storageDir: string;
	newCertificateCrtList?: string;
	newCertificateDirDefault?: boolean;
	/** The HAProxy process an endpoint writes to (its write queue's key). */
	addressOf(endpoint: string): string;
	close(): Promise<void>;
}

export function haproxyTarget(
	config: HaproxyTargetConfig,
	deps: TargetDeps,
	parts: HaproxyTargetParts,
): BuiltTarget {
	const haproxy = deps.haproxy ?? {};
	return {
		...createFleetRunner({
			name: config.name,
			kind: config.type,
			endpoints: parts.endpoints,
			policy: {
				legacyDuplicates: config.legacy_duplicates,
				allowNameRemoval: config.allow_name_removal,
				...(deps.neverDowngrade ? { neverDowngrade: true } : {}),
			},
			storageDir: parts.storageDir,
			...(parts.newCertificateCrtList !== undefined
				? { newCertificateCrtList: parts.newCertificateCrtList }
				: {}),
			...(parts.newCertificateDirDefault ? { newCertificateDirDefault: true } : {}),
			...(config.certificates ? { certificates: config.certificates } : {}),
			...(haproxy.endpointConcurrency ? { concurrency: haproxy.endpointConcurrency } : {}),
			writers: { queues: haproxy.writeQueues ?? createWriteQueues(), addressOf: parts.addressOf },
			...(haproxy.memory ? { memory: haproxy.memory(config.name) } : {}),
			...(haproxy.backoff === false ? { backoff: false } : {}),
			...(deps.owns ? { owns: (endpoint: string) => deps.owns!(config.name, endpoint) } : {}),
			reloads: { maxPerHour: config.reloads.max_per_hour },
			...(config.trust_store
				? { trust: loadTrustStore(config.trust_store, `targets.${config.name}.trust_store`) }
				: {}),
			...(deps.certificateTrust ? { certificateTrust: deps.certificateTrust } : {}),
			endpointDeadlineMs: config.endpoint_deadline,
			now: deps.now,
		}),
		close: parts.close,
	};
}
