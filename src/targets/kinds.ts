/**
 * Every target kind as the configuration sees it, one line each (its folder's kind.ts: schema, role, paths,
 * endpoints, what the rules across entries ask of it). What a kind builds and checks online is in ./registry.ts;
 * a kind listed in one and not the other fails to compile there.
 */
import { z } from "zod";
import { type KindEndpoint, type PathResolver, schemasOf, type TargetKind } from "../base/kind.js";
import { directoryTargetKind } from "./directory/kind.js";
import { dataplaneTargetKind } from "./haproxy-dataplane/kind.js";
import { runtimeTargetKind } from "./haproxy-runtime/kind.js";

const KINDS = [dataplaneTargetKind, runtimeTargetKind, directoryTargetKind] as const;

export const targetSchema = z.discriminatedUnion("type", schemasOf(KINDS));
export type TargetConfig = z.infer<typeof targetSchema>;
export type TargetType = TargetConfig["type"];

export const targetKinds: readonly TargetKind[] = KINDS;

/** The kind of a configured target; of an entry as written, the kind its `type` names, if any. */
export function targetKind(type: unknown): TargetKind | undefined {
	return targetKinds.find((k) => k.type === type);
}

/** The one kind of a parsed target, typed over the union (every parsed type has its kind). */
function kindOf(t: TargetConfig): TargetKind<string, z.ZodType<TargetConfig>> {
	return targetKind(t.type) as unknown as TargetKind<string, z.ZodType<TargetConfig>>;
}

/** A configured target with its local paths made absolute. */
export function resolveTargetPaths(t: TargetConfig, paths: PathResolver): TargetConfig {
	return kindOf(t).resolvePaths?.(t, paths) ?? t;
}

/**
 * Every endpoint the configured targets run each cycle, as their reports name them: what `status` counts, what
 * a cluster shards (the `shared` ones) and what every member runs itself (the others).
 */
export function targetEndpoints(targets: readonly TargetConfig[]): KindEndpoint[] {
	return targets.flatMap((t) => kindOf(t).endpoints(t));
}

/**
 * Whether this member runs an endpoint in a cluster: one on its own machine (a directory target) always, as every
 * member does; one every member reaches when the cluster says this member owns it (`clusterOwns`: the leader, or
 * the endpoint's shard owner).
 */
export function memberOwns(
	targets: readonly TargetConfig[],
	clusterOwns: (target: string, endpoint: string) => boolean,
): (target: string, endpoint: string) => boolean {
	const own = new Set(
		targetEndpoints(targets).flatMap((e) => (e.shared ? [] : [`${e.target}\n${e.endpoint}`])),
	);
	return (target, endpoint) => own.has(`${target}\n${endpoint}`) || clusterOwns(target, endpoint);
}
