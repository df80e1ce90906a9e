/**
 * Every source kind, by its config `type`. Adding a kind is one folder (schema.ts + index.ts), its schema in
 * the config's `sources` union (src/config/schema.ts) and one line here; a type without a line fails to compile.
 * Kinds that read ready-made certificates build a Source; kinds that make them (local-ca, acme) an Issuer.
 */
import type { SourceConfig } from "../config/schema.js";
import { createAcmeIssuer } from "./acme/index.js";
import { createDirectorySource } from "./directory/index.js";
import { createLocalCaIssuer } from "./local-ca/index.js";
import type { BuiltSource, Issuer, Source, SourceDeps } from "./types.js";

type Factory<K extends SourceConfig["type"]> = (
	config: Extract<SourceConfig, { type: K }>,
	deps: SourceDeps,
) => BuiltSource;

export const sourceFactories = {
	directory: (config, deps) => ({
		role: "source",
		source: createDirectorySource(config, deps.clock ? { clock: deps.clock } : {}),
	}),
	"local-ca": (config, deps) => ({ role: "issuer", issuer: createLocalCaIssuer(config, deps) }),
	acme: (config, deps) => ({ role: "issuer", issuer: createAcmeIssuer(config, deps) }),
} satisfies { [K in SourceConfig["type"]]: Factory<K> };

export function buildSource(config: SourceConfig, deps: SourceDeps): BuiltSource {
	const factory = sourceFactories[config.type] as Factory<SourceConfig["type"]>;
	return factory(config as never, deps);
}

/** Builds every configured source: the Sources to load each cycle, and the Issuers by name for renewal. */
export function buildSources(
	configs: readonly SourceConfig[],
	deps: SourceDeps,
): { sources: Source[]; issuers: Map<string, Issuer> } {
	const sources: Source[] = [];
	const issuers = new Map<string, Issuer>();
	for (const config of configs) {
		const built = buildSource(config, deps);
		if (built.role === "source") sources.push(built.source);
		else issuers.set(built.issuer.name, built.issuer);
	}
	return { sources, issuers };
}
