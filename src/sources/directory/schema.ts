import { z } from "zod";
import { duration } from "../../base/duration.js";

/** `type: directory`: certificates that another program puts in a directory, as PEM files. */
export const directorySourceSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("directory"),
	/** The directory to read (not recursive). */
	path: z.string().min(1),
	/** In the daemon, how long the directory must be quiet after a change before it is read again. */
	debounce: duration.prefault("500ms"),
});
export type DirectorySourceConfig = z.infer<typeof directorySourceSchema>;
