/**
 * Every target kind, by its config `type`: one line each. A type without a line fails to compile.
 * A built target is a runner (what the cycle calls) plus close() for the connections it holds.
 */
import type { TargetConfig } from "../config/schema.js";
import { CertificateeError } from "../errors.js";
import type { TargetRunner } from "../reconcile/cycle.js";
import { storageDirName } from "../reconcile/model.js";
import { apiKey, createWriteQueues, socketKey, type WriteQueues } from "../reconcile/writers.js";
import { pendingHooksIn } from "./directory/pending-hooks.js";
import { createDirectoryRunner } from "./directory/runner.js";
import type { FleetMemory } from "./fleet-memory.js";
import type { ChallengeMapNode } from "./haproxy/challenge-map.js";
import { createDataplaneChallengeMaps } from "./haproxy-dataplane/challenge-map.js";
import { createDataplaneEndpoint } from "./haproxy-dataplane/index.js";
import { createFleetRunner } from "./haproxy-fleet.js";
import { createRuntimeChallengeMap } from "./haproxy-runtime/challenge-map.js";
import { createRuntimeEndpoint } from "./haproxy-runtime/index.js";

export interface TargetDeps {
	now: () => Date;
	/** Warnings a driver must not hide (insecure TLS, a reload an endpoint caused). */
	warn?: (fields: Record<string, unknown>, message: string) => void;
	/** Endpoints processed at once inside a target (default 16). */
	endpointConcurrency?: number;
	/** plan and status: drivers leave the disk as they find it (no leftover cleanup). */
	readOnly?: boolean;
	/** One write queue per HAProxy process, shared by every target built with it (one per engine). Without
	 * it the target gets queues of its own: its endpoints still share by address, other targets do not. */
	writeQueues?: WriteQueues;
	/** Where a target keeps what it remembers of its endpoints across restarts (backoff, pinned duplicates). */
	memory?: (target: string) => FleetMemory;
	/** false: endpoints that are backing off are tried anyway (an operator's one-shot `sync`). Default true. */
	backoff?: boolean;
	/** The state directory, for what a target must remember across restarts (failed on_change hooks). */
	stateDir?: string;
}

export interface BuiltTarget {
	runner: TargetRunner;
	close(): Promise<void>;
}

type Factory<K extends TargetConfig["type"]> = (
	config: Extract<TargetConfig, { type: K }>,
	deps: TargetDeps,
) => BuiltTarget;

export const targetFactories = {
	"haproxy-runtime": (config, deps) => {
		const endpoint = createRuntimeEndpoint(config, {
			now: deps.now,
			...(deps.readOnly ? { readOnly: true } : {}),
		});
		const dirName = storageDirName(config.crt_dir_name ?? config.crt_dir);
		return {
			runner: createFleetRunner({
				name: config.name,
				kind: config.type,
				endpoints: [endpoint],
				policy: { legacyDuplicates: config.legacy_duplicates, allowNameRemoval: config.allow_name_removal },
				storageDir: dirName,
				newCertificateCrtList: config.crt_list ?? dirName,
				...(config.certificates ? { certificates: config.certificates } : {}),
				writers: {
					queues: deps.writeQueues ?? createWriteQueues(),
					addressOf: () => socketKey(config.socket),
				},
				...(deps.memory ? { memory: deps.memory(config.name) } : {}),
				...(deps.backoff === false ? { backoff: false } : {}),
				reloads: { maxPerHour: config.reloads.max_per_hour },
				now: deps.now,
			}),
			close: () => endpoint.close(),
		};
	},
	"haproxy-dataplane": (config, deps) => {
		const endpoints = config.endpoints.map((e) =>
			createDataplaneEndpoint(e, {
				now: deps.now,
				allowNameRemoval: config.allow_name_removal,
				storageDir: config.storage_dir,
				bufsize: config.bufsize,
				...(deps.warn ? { warn: deps.warn } : {}),
			}),
		);
		const urls = new Map(config.endpoints.map((e) => [e.name, apiKey(e.url)]));
		return {
			runner: createFleetRunner({
				name: config.name,
				kind: config.type,
				endpoints,
				policy: { legacyDuplicates: config.legacy_duplicates, allowNameRemoval: config.allow_name_removal },
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
				reloads: { maxPerHour: config.reloads.max_per_hour },
				now: deps.now,
			}),
			close: async () => {
				await Promise.all(endpoints.map((e) => e.close()));
			},
		};
	},
	directory: (config, deps) => ({
		runner: createDirectoryRunner(
			config,
			deps.stateDir && !deps.readOnly ? { pendingHooks: pendingHooksIn(deps.stateDir, config.name) } : {},
		),
		close: async () => {},
	}),
} satisfies { [K in TargetConfig["type"]]: Factory<K> };

export function buildTarget(config: TargetConfig, deps: TargetDeps): BuiltTarget {
	const factory = targetFactories[config.type] as Factory<TargetConfig["type"]>;
	return factory(config as never, deps);
}

/**
 * The HAProxy nodes of the named targets that hold HTTP-01 answers in `map` (an ACME source's
 * `http01: { via: haproxy-map }`): one per haproxy-runtime target, one per haproxy-dataplane endpoint.
 * Config validation already checked the names, kinds and http_address; this throws if it was bypassed.
 */
export function challengeMapNodes(
	configs: readonly TargetConfig[],
	names: readonly string[],
	map: string,
): ChallengeMapNode[] {
	const nodes: ChallengeMapNode[] = [];
	try {
		for (const name of names) {
			const config = configs.find((t) => t.name === name);
			if (config?.type === "haproxy-runtime") nodes.push(createRuntimeChallengeMap(config, map));
			else if (config?.type === "haproxy-dataplane") nodes.push(...createDataplaneChallengeMaps(config, map));
			else {
				throw new CertificateeError(
					"CONFIG_INVALID",
					`http01.targets names "${name}", which is ${config ? `a ${config.type} target` : "no target"}`,
					{
						context: { field: "http01.targets", target: name },
						hint: "name haproxy-runtime or haproxy-dataplane targets",
					},
				);
			}
		}
	} catch (e) {
		for (const node of nodes) void node.close();
		throw e;
	}
	return nodes;
}
