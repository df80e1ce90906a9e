import { z } from "zod";

export const runtimeTargetSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("haproxy-runtime"),
	socket: z.string().min(1),
	crt_dir: z.string().min(1),
	crt_list: z.string().optional(),
	probe: z.string().optional(),
	certificates: z.array(z.string()).optional(),
});
export type RuntimeTargetConfig = z.infer<typeof runtimeTargetSchema>;
