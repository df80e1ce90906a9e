/**
 * Every target kind, by its config `type`: one line each. Adding a kind is one folder (schema.ts, and a
 * target.ts whose factory builds a BuiltTarget, see ./types.ts), its schema in the config's `targets` union
 * (src/config/schema.ts) and one line here; a type without a line fails to compile.
 */
import type { TargetConfig } from "../config/schema.js";
import { CertificateeError } from "../errors.js";
import { directoryTarget } from "./directory/target.js";
import type { ChallengeMapNode } from "./haproxy/challenge-map.js";
import { createDataplaneChallengeMaps } from "./haproxy-dataplane/challenge-map.js";
import { dataplaneTarget } from "./haproxy-dataplane/target.js";
import { createRuntimeChallengeMap } from "./haproxy-runtime/challenge-map.js";
import { runtimeTarget } from "./haproxy-runtime/target.js";
import type { BuiltTarget, TargetDeps, TargetFactory } from "./types.js";

export type { BuiltTarget, TargetDeps } from "./types.js";

export const targetFactories = {
	"haproxy-runtime": runtimeTarget,
	"haproxy-dataplane": dataplaneTarget,
	directory: directoryTarget,
} satisfies { [K in TargetConfig["type"]]: TargetFactory<K> };

export function buildTarget(config: TargetConfig, deps: TargetDeps): BuiltTarget {
	const factory = targetFactories[config.type] as TargetFactory<TargetConfig["type"]>;
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
