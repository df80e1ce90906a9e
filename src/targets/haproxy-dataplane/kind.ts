/** The `haproxy-dataplane` kind as the configuration sees it: its endpoints, each a Data Plane API. */
import type { RawEntry, TargetKind } from "../../base/kind.js";
import { dataplaneTargetSchema } from "./schema.js";

export const dataplaneTargetKind: TargetKind<"haproxy-dataplane", typeof dataplaneTargetSchema> = {
	type: "haproxy-dataplane",
	schema: dataplaneTargetSchema,
	role: "target",
	// storage_dir and crt_list name files on the API's machine: left as written.
	resolvePaths: (t, paths) => ({
		...t,
		endpoints: t.endpoints.map((e) =>
			e.ca_file === undefined ? e : { ...e, ca_file: paths.file(e.ca_file) },
		),
	}),
	endpoints: (t) => t.endpoints.map((e) => ({ target: t.name, endpoint: e.name, shared: true })),
	rollout: true,
	challengeMaps: {
		unaddressed: (raw, _name, by) =>
			(Array.isArray(raw.endpoints) ? (raw.endpoints as unknown[]) : []).flatMap((e, k) =>
				e !== null && typeof e === "object" && (e as RawEntry).http_address === undefined
					? [
							{
								field: `endpoints[${k}].http_address`,
								message: `endpoint "${String((e as RawEntry).name)}" needs http_address (host:port where its HAProxy serves port 80): ${by} sends HTTP-01 through it`,
							},
						]
					: [],
			),
	},
};
