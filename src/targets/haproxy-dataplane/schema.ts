import { z } from "zod";

export const dataplaneEndpointSchema = z.strictObject({
	name: z.string().min(1),
	url: z.url({ protocol: /^https?$/, error: "expected an http(s) URL" }),
	username: z.string().min(1),
	password: z.string(),
	ca_file: z.string().optional(),
	insecure_skip_verify: z.boolean().default(false),
	probe: z.string().optional(),
});

export const dataplaneTargetSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("haproxy-dataplane"),
	endpoints: z.array(dataplaneEndpointSchema).min(1),
	certificates: z.array(z.string()).optional(),
});
export type DataplaneTargetConfig = z.infer<typeof dataplaneTargetSchema>;
