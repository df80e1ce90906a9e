/** The `local-ca` kind as the configuration sees it: an issuer that signs any name, its CA kept in the state store. */
import type { SourceKind } from "../../base/kind.js";
import { localCaSourceSchema } from "./schema.js";

export const localCaSourceKind: SourceKind<"local-ca", typeof localCaSourceSchema> = {
	type: "local-ca",
	schema: localCaSourceSchema,
	role: "issuer",
};
