/**
 * What every source kind builds, by its config `type`. Adding a kind is one folder (schema.ts, kind.ts for what
 * the configuration sees of it, index.ts), one line in ./kinds.ts and one entry here; a type without an entry
 * fails to compile.
 * Kinds that read ready-made certificates build a Source; kinds that make them (local-ca, acme) an Issuer.
 * A kind's module is imported when a source of that kind is built: the ACME client and X.509 builder cost
 * a CLI half a second of start-up, which `validate` of a directory source never needs.
 */
import type { OnlineContext, PendingCheck } from "../base/online.js";
import type { SourceConfig, SourceType } from "./kinds.js";
import type { BuiltSource, Issuer, Source, SourceDeps } from "./types.js";

type Factory<K extends SourceType> = (
	config: Extract<SourceConfig, { type: K }>,
	deps: SourceDeps,
) => Promise<BuiltSource>;

/** What a kind builds, beside its description in ./kinds.ts. */
interface SourceEntry<K extends SourceType> {
	build: Factory<K>;
	/** `validate --online`: what a source of this kind contacts (absent: nothing). */
	online?: (config: Extract<SourceConfig, { type: K }>, context: OnlineContext) => Promise<PendingCheck[]>;
}

/** For kinds that hold nothing between calls (files are opened and closed per load or issue). */
const holdsNothing = async () => {};

export const sourceRegistry = {
	directory: {
		build: async (config, deps) => {
			const { createDirectorySource } = await import("./directory/index.js");
			const { storedSourceMemory } = await import("./directory/memory.js");
			const { readReplacements } = await import("../store/records.js");
			return {
				role: "source",
				source: createDirectorySource(config, {
					...(deps.clock ? { clock: deps.clock } : {}),
					...(deps.local ? { memory: storedSourceMemory(config.name, deps.local) } : {}),
					replacements: async () =>
						new Map([...(await readReplacements(deps.store))].map(([name, r]) => [name, r.fingerprint])),
				}),
				close: holdsNothing,
			};
		},
	},
	"local-ca": {
		build: async (config, deps) => {
			const { createLocalCaIssuer } = await import("./local-ca/index.js");
			return { role: "issuer", issuer: createLocalCaIssuer(config, deps), close: holdsNothing };
		},
	},
	acme: {
		build: async (config, deps) => {
			const { createAcmeIssuer } = await import("./acme/index.js");
			const issuer = createAcmeIssuer(config, deps);
			return { role: "issuer", issuer, close: () => issuer.close() };
		},
		online: async (config, context) => (await import("./acme/online.js")).acmeOnlineChecks(config, context),
	},
} satisfies { [K in SourceType]: SourceEntry<K> };

/** The entry of a parsed source's kind, typed over the union. */
function entryOf(config: SourceConfig): SourceEntry<SourceType> {
	return sourceRegistry[config.type] as unknown as SourceEntry<SourceType>;
}

export function buildSource(config: SourceConfig, deps: SourceDeps): Promise<BuiltSource> {
	return entryOf(config).build(config as never, deps);
}

/** Every check `validate --online` makes of the configured sources, in their order. */
export async function sourceOnlineChecks(
	configs: readonly SourceConfig[],
	context: OnlineContext,
): Promise<PendingCheck[]> {
	return (await Promise.all(configs.map((c) => entryOf(c).online?.(c as never, context) ?? []))).flat();
}

export interface BuiltSources {
	/** The Sources to load each cycle. */
	sources: Source[];
	/** The Issuers by name, for renewal. */
	issuers: Map<string, Issuer>;
	/** Closes every built source and issuer (each once, all of them even when one fails). */
	close(): Promise<void>;
}

/** Builds every configured source; when one fails to build, those built before it are closed. */
export async function buildSources(
	configs: readonly SourceConfig[],
	deps: SourceDeps,
): Promise<BuiltSources> {
	const built: BuiltSource[] = [];
	const close = async () => {
		const outcomes = await Promise.allSettled(built.splice(0).map((b) => b.close()));
		const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
		if (failed) throw failed.reason;
	};
	try {
		for (const config of configs) built.push(await buildSource(config, deps));
	} catch (e) {
		// Nothing was used yet, so closing cannot lose work; the build error is the one to report.
		void close().catch(() => undefined);
		throw e;
	}
	const sources: Source[] = [];
	const issuers = new Map<string, Issuer>();
	for (const b of built) {
		if (b.role === "source") sources.push(b.source);
		else issuers.set(b.issuer.name, b.issuer);
	}
	return { sources, issuers, close };
}
