import { z } from "zod";
import { duration } from "../../base/duration.js";

/** `type: directory`: certificates that another program puts in a directory, as PEM files. */
export const directorySourceSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("directory"),
	/** The directory to read (not recursive). */
	path: z.string().min(1),
	/**
	 * In the daemon, how long the directory must be quiet after a change before it is read again (a cycle starts
	 * at most 10 × debounce after the first change of a burst, however long the burst). Unchanged files cost
	 * nothing to read again, so this is short.
	 */
	debounce: duration.prefault("100ms"),
});
export type DirectorySourceConfig = z.infer<typeof directorySourceSchema>;
