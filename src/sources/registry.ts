/**
 * Every source kind, by its config `type`. Adding a kind is one folder (schema.ts + index.ts exporting a
 * `<kind>Kind` record) plus one line in `sourceKinds`; config parsing and construction follow from it.
 */
import { z } from "zod";
import { directoryKind } from "./directory/index.js";
import { localCaKind } from "./local-ca/index.js";
import type { BuiltSource, SourceDeps } from "./types.js";

export const sourceKinds = {
	directory: directoryKind,
	"local-ca": localCaKind,
};
// A kind registered under a key that differs from its schema's `type` fails to compile here.
const registered: { [K in keyof typeof sourceKinds]: SourceKind<K> } = sourceKinds;

/** A kind's registration: its config schema (whose `type` is the kind's key) and a factory. */
export interface SourceKind<K extends string> {
	schema: z.ZodType<{ type: K } & Record<string, unknown>, unknown>;
	create(config: never, deps: SourceDeps): BuiltSource;
}

type Kinds = typeof sourceKinds;
export type SourceType = keyof Kinds;
export type SourceConfig = { [K in SourceType]: z.output<Kinds[K]["schema"]> }[SourceType];

const types = Object.keys(registered) as [SourceType, ...SourceType[]];

/** One entry of the config's `sources` list: `type` picks the kind, whose strict schema checks the rest. */
export const sourceConfigSchema = z
	.looseObject({ type: z.enum(types) })
	.transform((value, ctx): SourceConfig => {
		const parsed = sourceKinds[value.type].schema.safeParse(value);
		if (!parsed.success) {
			for (const issue of parsed.error.issues)
				ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
			return z.NEVER;
		}
		return parsed.data as SourceConfig;
	});

export function buildSource(config: SourceConfig, deps: SourceDeps): BuiltSource {
	const kind = sourceKinds[config.type] as { create(config: SourceConfig, deps: SourceDeps): BuiltSource };
	return kind.create(config, deps);
}
