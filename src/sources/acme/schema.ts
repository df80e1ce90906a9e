import { z } from "zod";

export const acmeSourceSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("acme"),
	directory_url: z.url({ protocol: /^https?$/, error: "expected an http(s) URL" }),
	email: z.email().optional(),
});
export type AcmeSourceConfig = z.infer<typeof acmeSourceSchema>;
