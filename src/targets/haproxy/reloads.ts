/** The `reloads` key both HAProxy targets share (docs/reloads.md). */
import { z } from "zod";

export const reloadsSchema = z
	.strictObject({
		/** Reloads certificatee may do per endpoint in any hour; 0 (default): never, pending changes are reported. */
		max_per_hour: z.number().int().min(0).max(60).default(0),
	})
	.prefault({});
export type ReloadsConfig = z.output<typeof reloadsSchema>;
