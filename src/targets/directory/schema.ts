/** Config of a `type: directory` target: where certificates are written as files, and in which layout. */
import { z } from "zod";
import { duration } from "../../base/duration.js";
import { trustStoreSchema } from "../../certificates/trust.js";

const fileMode = z
	.string()
	.regex(/^0?[0-7]{3,4}$/, { error: 'expected an octal mode such as "0644"' })
	.transform((text) => Number.parseInt(text, 8));

export const directoryTargetSchema = z.strictObject({
	/** A plain name, like a certificate's: it names a directory under state_dir (pending on_change runs). */
	name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "letters, digits, '.', '_' and '-' only"),
	type: z.literal("directory"),
	/** Absolute path. kubernetes-tls and split: the set's directory (one certificate) or the parent of one directory per certificate; haproxy-pem: the shared directory of <name>.pem files. */
	path: z.string().startsWith("/", { error: "path must be absolute" }),
	layout: z.enum(["kubernetes-tls", "haproxy-pem", "split"]).default("kubernetes-tls"),
	/** How a directory set is published (see docs/atomic-directories.md). */
	swap: z.enum(["exchange", "symlink", "exchange-or-symlink"]).default("exchange"),
	/** Certificate names this target receives; default all. */
	certificates: z.array(z.string().min(1)).min(1).optional(),
	/** A PEM bundle (or `system`) every chain must verify against before it is written here (docs/rollouts.md). */
	trust_store: trustStoreSchema,
	/** Runs once per certificate whose files actually changed; never on a no-op. */
	on_change: z
		.strictObject({
			command: z
				.array(z.string())
				.min(1, { error: "command is an argv list, e.g. [systemctl, reload, nginx]" }),
			timeout: duration.prefault("30s"),
		})
		.optional(),
	/** Mode of certificate (public) files; keys are always 0600. */
	file_mode: fileMode.prefault("0644"),
	/** Mode of each published directory; default: keep the existing directory's mode, 0755 for a new one. */
	dir_mode: fileMode.optional(),
	/** "user:group" or "uid:gid" for directories and files; needs root. Default: certificatee's own. */
	owner: z
		.string()
		.regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]*:[A-Za-z0-9_][A-Za-z0-9_.-]*$/, { error: 'expected "user:group"' })
		.optional(),
	/**
	 * Write even when another account can write the directory certificatee creates names in (refused with
	 * ATOMICDIR_UNSAFE_PARENT otherwise): that account can then replace what is published (docs/security.md).
	 */
	allow_writable_parent: z.boolean().default(false),
	/** kubernetes-tls: a PEM file with the CA to write as ca.crt when the chain does not end in a root. */
	ca_file: z.string().startsWith("/", { error: "ca_file must be absolute" }).optional(),
});
export type DirectoryTargetConfig = z.infer<typeof directoryTargetSchema>;
