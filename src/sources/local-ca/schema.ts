import { z } from "zod";
import { duration } from "../../base/duration.js";

/** `type: local-ca`: an embedded CA in the state directory that issues leaf certificates. */
export const localCaSourceSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("local-ca"),
	/** Lifetime of issued leaves; a certificates[] entry's `lifetime` overrides it. */
	lifetime: duration.prefault("7d"),
	/** Subject CN of the CA created on first use. */
	ca_common_name: z.string().min(1).default("certificatee local CA"),
	/** Lifetime of the CA created on first use. */
	ca_lifetime: duration.prefault("3650d"),
});
export type LocalCaSourceConfig = z.infer<typeof localCaSourceSchema>;
