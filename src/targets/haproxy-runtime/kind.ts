/** The `haproxy-runtime` kind as the configuration sees it: one node, its socket and crt_dir on this machine. */
import { parseAddress } from "../../base/address.js";
import type { TargetKind } from "../../base/kind.js";
import { runtimeTargetSchema } from "./schema.js";

export const runtimeTargetKind: TargetKind<"haproxy-runtime", typeof runtimeTargetSchema> = {
	type: "haproxy-runtime",
	schema: runtimeTargetSchema,
	role: "target",
	resolvePaths(t, paths) {
		const address = parseAddress(t.socket);
		const unix = t.socket.startsWith("unix@");
		const socket = "path" in address ? `${unix ? "unix@" : ""}${paths.file(address.path)}` : t.socket;
		// HAProxy names certificates by crt_dir as haproxy.cfg spells it: keep that spelling.
		return { ...t, socket, crt_dir: paths.file(t.crt_dir), crt_dir_name: t.crt_dir_name ?? t.crt_dir };
	},
	// The target is its one node, named as the target.
	endpoints: (t) => [{ target: t.name, endpoint: t.name, shared: true }],
	rollout: true,
	challengeMaps: {
		unaddressed: (raw, name, by) =>
			raw.http_address === undefined
				? [
						{
							field: "http_address",
							message: `target "${name}" needs http_address (host:port where it serves port 80): ${by} sends HTTP-01 through it`,
						},
					]
				: [],
	},
};
