import { z } from "zod";

export const localCaSourceSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("local-ca"),
});
export type LocalCaSourceConfig = z.infer<typeof localCaSourceSchema>;
