/**
 * What every target kind builds, by its config `type`: one entry each. Adding a kind is one folder (schema.ts,
 * kind.ts for what the configuration sees of it, and a target.ts whose factory builds a BuiltTarget, see
 * ./types.ts), one line in ./kinds.ts and one entry here; a type without an entry fails to compile.
 */
import type { OnlineContext, PendingCheck } from "../base/online.js";
import { CertificateeError } from "../errors.js";
import { orphanStaging } from "./directory/orphans.js";
import { directoryTarget } from "./directory/target.js";
import type { ChallengeMapNode } from "./haproxy/challenge-map.js";
import { createDataplaneChallengeMaps } from "./haproxy-dataplane/challenge-map.js";
import { dataplaneOnlineChecks } from "./haproxy-dataplane/online.js";
import { dataplaneTarget } from "./haproxy-dataplane/target.js";
import { createRuntimeChallengeMap } from "./haproxy-runtime/challenge-map.js";
import { runtimeOnlineChecks } from "./haproxy-runtime/online.js";
import { runtimeTarget } from "./haproxy-runtime/target.js";
import { type TargetConfig, type TargetType, targetKinds } from "./kinds.js";
import type { BuiltTarget, TargetDeps, TargetFactory } from "./types.js";

export type { BuiltTarget, TargetDeps } from "./types.js";

/** What a kind builds, beside its description in ./kinds.ts. */
interface TargetEntry<K extends TargetType> {
	build: TargetFactory<K>;
	/** Its nodes hold HTTP-01 answers in HAProxy maps: one node per process (a runtime target, a dataplane endpoint). */
	challengeMaps?: (config: Extract<TargetConfig, { type: K }>, map: string) => ChallengeMapNode[];
	/** `validate --online`: what a target of this kind contacts (absent: nothing, a directory is checked offline). */
	online?: (config: Extract<TargetConfig, { type: K }>, context: OnlineContext) => PendingCheck[];
	/** What targets of this kind left on disk that no configured one cleans up (one call with all of them). */
	leftovers?: (
		configs: Array<Extract<TargetConfig, { type: K }>>,
		certificates: readonly string[],
	) => Promise<string[]>;
}

export const targetRegistry = {
	"haproxy-runtime": {
		build: runtimeTarget,
		challengeMaps: (c, map) => [createRuntimeChallengeMap(c, map)],
		online: runtimeOnlineChecks,
	},
	"haproxy-dataplane": {
		build: dataplaneTarget,
		challengeMaps: createDataplaneChallengeMaps,
		online: dataplaneOnlineChecks,
	},
	directory: { build: directoryTarget, leftovers: orphanStaging },
} satisfies { [K in TargetType]: TargetEntry<K> };

/** The entry of a parsed target's kind, typed over the union. */
function entryOf(config: TargetConfig): TargetEntry<TargetType> {
	return targetRegistry[config.type] as unknown as TargetEntry<TargetType>;
}

export function buildTarget(config: TargetConfig, deps: TargetDeps): BuiltTarget {
	return entryOf(config).build(config as never, deps);
}

/** Every check `validate --online` makes of the configured targets, in their order. */
export function targetOnlineChecks(configs: readonly TargetConfig[], context: OnlineContext): PendingCheck[] {
	return configs.flatMap((c) => entryOf(c).online?.(c as never, context) ?? []);
}

/**
 * Staging left on disk by targets no longer configured (directory targets: sets that may hold private keys),
 * for the daemon to report each cycle; never deleted.
 */
export async function leftStaging(
	configs: readonly TargetConfig[],
	certificates: readonly string[],
): Promise<string[]> {
	const left: string[] = [];
	for (const type of new Set(configs.map((c) => c.type))) {
		const ofKind = configs.filter((c) => c.type === type);
		const leftovers = ofKind[0] && entryOf(ofKind[0]).leftovers;
		if (leftovers) left.push(...(await leftovers(ofKind as never, certificates)));
	}
	return left;
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
			const maps = config && entryOf(config).challengeMaps;
			if (config && maps) nodes.push(...maps(config as never, map));
			else {
				const holders = targetKinds.filter((k) => k.challengeMaps).map((k) => k.type);
				throw new CertificateeError(
					"CONFIG_INVALID",
					`http01.targets names "${name}", which is ${config ? `a ${config.type} target` : "no target"}`,
					{
						context: { field: "http01.targets", target: name },
						hint: `name ${holders.join(" or ")} targets`,
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
