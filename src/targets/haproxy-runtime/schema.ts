import { z } from "zod";
import { httpAddressSchema, probeAddressSchema } from "../../base/address.js";
import { duration } from "../../base/duration.js";
import { trustStoreSchema } from "../../certificates/trust.js";
import { endpointDeadline } from "../haproxy/deadline.js";
import { reloadsSchema } from "../haproxy/reloads.js";

/**
 * A HAProxy node without the Data Plane API: certificate files in `crt_dir`, runtime updates through the
 * stats socket (or the master CLI). See docs/haproxy-runtime-target.md.
 */
export const runtimeTargetSchema = z
	.strictObject({
		name: z.string().min(1),
		type: z.literal("haproxy-runtime"),
		/** Unix socket path or host:port of the stats socket (`level admin`), or of the master CLI. */
		socket: z.string().min(1),
		/** The socket is the master CLI (`-S`): commands are sent to the current worker with `@1`. */
		master_socket: z.boolean().default(false),
		/** Directory holding one combined PEM (leaf, chain, key) per certificate. */
		crt_dir: z.string().min(1),
		/** How haproxy.cfg spells crt_dir (HAProxy names certificates by that literal string). Default: crt_dir. */
		crt_dir_name: z.string().min(1).optional(),
		/** crt-list new certificates are added to; default: the crt directory itself (when bound with `crt <dir>`). */
		crt_list: z.string().optional(),
		/**
		 * SSL options and SNI filters of the line a new certificate gets in crt_list, as a crt-list line spells
		 * them after the file name: `[alpn h2,http/1.1 ocsp-update on] !*.internal.example`.
		 */
		crt_list_options: z
			.string()
			.regex(/^\s*(\[[^\]\n]*\])?(\s+[^\s[\]]+)*\s*$/, {
				message:
					'crt_list_options is "[<ssl options>] <sni filter>...", as a crt-list line spells them after the file name, e.g. "[alpn h2] *.example.com"',
			})
			.optional(),
		/**
		 * HAProxy 3.x crt-store sections, by name: the `crt-base` / `key-base` their `load` lines are relative
		 * to (the runtime API prints a load's files relative to them, and not the bases themselves).
		 */
		crt_stores: z
			.record(
				z.string().min(1),
				z.strictObject({ crt_base: z.string().min(1).optional(), key_base: z.string().min(1).optional() }),
			)
			.optional(),
		/**
		 * The configuration file(s) HAProxy runs (`-f`, in order). certificatee reads the `global` section's
		 * crt-base, key-base and ssl-load-extra-del-ext, and every crt-store section (crt-base, key-base, load
		 * lines): where each load's certificate and key files are, which HAProxy 3.0 does not print and 3.2+
		 * prints relative to bases it does not print. Nothing else of it is read; it is never written.
		 */
		haproxy_config: z
			.union([z.string().min(1), z.array(z.string().min(1)).min(1)])
			.transform((v) => (typeof v === "string" ? [v] : v))
			.optional(),
		/** host:port of a TLS bind serving these certificates, for the served-certificate probe. */
		probe: probeAddressSchema.optional(),
		/** host:port where this HAProxy serves plain HTTP (port 80): HTTP-01 through an HAProxy map checks it there. */
		http_address: httpAddressSchema.optional(),
		certificates: z.array(z.string()).optional(),
		/** A PEM bundle (or `system`) every chain must verify against before it is pushed to this target. */
		trust_store: trustStoreSchema,
		/** Legacy duplicates: "remove" them once their keeper is stable (default), or "report" and keep them current. */
		legacy_duplicates: z.enum(["remove", "report"]).default("remove"),
		/** Allow a runtime update whose certificate no longer covers a name the served one covers. */
		allow_name_removal: z.boolean().default(false),
		/** HAProxy's tune.bufsize: requests of this size or more are refused (they crash HAProxy 2.6-3.2). */
		bufsize: z.number().int().min(1024).default(16_384),
		/** Per-command timeout on the socket. */
		timeout: duration.default(10_000),
		/** HAProxy's master CLI (`-S`), where certificatee sends `reload` when the reload budget allows one. */
		master_cli: z.string().min(1).optional(),
		/** The reload budget (docs/reloads.md): default max_per_hour 0, never reload. */
		reloads: reloadsSchema,
		/** The node's whole part of a cycle (observe, writes, probes): past it, failed for the cycle. */
		endpoint_deadline: endpointDeadline,
		/**
		 * Every how many observations of a running certificatee one reads every certificate's detail again; the
		 * others read what can have changed (docs/haproxy-runtime-target.md). 1: every observation is full.
		 */
		full_observation_every: z.number().int().min(1).default(10),
	})
	.refine((c) => c.reloads.max_per_hour === 0 || c.master_cli !== undefined || c.master_socket, {
		message:
			"reloads.max_per_hour above 0 needs master_cli: the master CLI socket (haproxy -W -S <path>) certificatee sends reload to",
		path: ["master_cli"],
	});
export type RuntimeTargetConfig = z.infer<typeof runtimeTargetSchema>;

/** crt_list_options as the SSL options (without brackets) and SNI filters of a crt-list line. */
export function crtListOptions(text: string | undefined): { sslOptions?: string; filters?: string[] } {
	if (text === undefined) return {};
	const m = /^\s*(?:\[([^\]]*)\])?(.*)$/.exec(text);
	const sslOptions = m?.[1]?.trim();
	const filters = (m?.[2] ?? "").split(/\s+/).filter((f) => f !== "");
	return { ...(sslOptions ? { sslOptions } : {}), ...(filters.length > 0 ? { filters } : {}) };
}
