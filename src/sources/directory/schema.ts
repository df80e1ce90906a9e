import { z } from "zod";

export const directorySourceSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("directory"),
	path: z.string().min(1),
});
export type DirectorySourceConfig = z.infer<typeof directorySourceSchema>;
