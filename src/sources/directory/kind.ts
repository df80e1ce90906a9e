/** The `directory` source kind as the configuration sees it: ready-made PEM files in a directory of this machine. */
import type { SourceKind } from "../../base/kind.js";
import { directorySourceSchema } from "./schema.js";

export const directorySourceKind: SourceKind<"directory", typeof directorySourceSchema> = {
	type: "directory",
	schema: directorySourceSchema,
	role: "source",
	resolvePaths: (s, paths) => ({ ...s, path: paths.file(s.path) }),
};
