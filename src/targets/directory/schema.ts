import { z } from "zod";

export const directoryTargetSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("directory"),
	path: z.string().min(1),
	layout: z.enum(["kubernetes-tls", "haproxy-pem", "split"]).default("kubernetes-tls"),
	certificates: z.array(z.string()).optional(),
});
export type DirectoryTargetConfig = z.infer<typeof directoryTargetSchema>;
