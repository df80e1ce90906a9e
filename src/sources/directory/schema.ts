import { z } from "zod";
import { durationSchema } from "../../duration.js";

/** `type: directory`: certificates that another program puts in a directory, as PEM files. */
export const directorySourceSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("directory"),
	/** The directory to read (not recursive). */
	path: z.string().min(1),
	/** In the daemon, how long the directory must be quiet after a change before it is read again. */
	debounce: durationSchema.prefault("500ms"),
});
export type DirectorySource = z.infer<typeof directorySourceSchema>;
