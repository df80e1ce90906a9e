/** The `directory` kind as the configuration sees it: one endpoint, its path, on the machine that runs it. */
import type { TargetKind } from "../../base/kind.js";
import { directoryTargetSchema } from "./schema.js";

export const directoryTargetKind: TargetKind<"directory", typeof directoryTargetSchema> = {
	type: "directory",
	schema: directoryTargetSchema,
	role: "target",
	resolvePaths: (t, paths) =>
		t.on_change === undefined
			? t
			: { ...t, on_change: { ...t.on_change, command: paths.command(t.on_change.command) } },
	// Files on this machine: in a cluster every member writes its own (docs/cluster.md).
	endpoints: (t) => [{ target: t.name, endpoint: t.path, shared: false }],
	rollout: false,
};
