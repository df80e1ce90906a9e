/**
 * Every source kind as the configuration sees it, one line each (its folder's kind.ts: schema, role, paths, what
 * the rules across entries ask of it). What a kind builds is in ./registry.ts; a kind listed in one and not the
 * other fails to compile there.
 */
import { z } from "zod";
import { type PathResolver, type SourceKind, schemasOf } from "../base/kind.js";
import { acmeSourceKind } from "./acme/kind.js";
import { directorySourceKind } from "./directory/kind.js";
import { localCaSourceKind } from "./local-ca/kind.js";

const KINDS = [directorySourceKind, acmeSourceKind, localCaSourceKind] as const;

export const sourceSchema = z.discriminatedUnion("type", schemasOf(KINDS));
export type SourceConfig = z.infer<typeof sourceSchema>;
export type SourceType = SourceConfig["type"];

export const sourceKinds: readonly SourceKind[] = KINDS;

/** The kind of a configured source; of an entry as written, the kind its `type` names, if any. */
export function sourceKind(type: unknown): SourceKind | undefined {
	return sourceKinds.find((k) => k.type === type);
}

/** The source types that make certificates (an issuer is a source of one of these types). */
export const issuerTypes: readonly string[] = sourceKinds
	.filter((k) => k.role === "issuer")
	.map((k) => k.type);

/** A configured source with its local paths made absolute. */
export function resolveSourcePaths(s: SourceConfig, paths: PathResolver): SourceConfig {
	const kind = sourceKind(s.type) as unknown as SourceKind<string, z.ZodType<SourceConfig>>;
	return kind.resolvePaths?.(s, paths) ?? s;
}
