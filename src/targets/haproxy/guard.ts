/**
 * The name-removal guard, pure: HAProxy recomputes a certificate's SNI names from the new certificate at
 * commit, so an update whose certificate covers fewer names silently moves traffic to the default
 * certificate. Shared with the reconciler, which runs the same check at plan time.
 */
import { droppedNames } from "../../certificates/index.js";
import { CertificateeError } from "../../errors.js";

/** UPDATE_DROPS_NAMES when `next` stops covering a served name and removal is not allowed. */
export function checkNameRemoval(input: {
	current: readonly string[];
	next: readonly string[];
	allowNameRemoval: boolean;
	endpoint: string;
	ref: string;
}): CertificateeError | undefined {
	if (input.allowNameRemoval) return undefined;
	const dropped = droppedNames(input.current, input.next);
	if (dropped.length === 0) return undefined;
	return new CertificateeError(
		"UPDATE_DROPS_NAMES",
		`update of ${input.ref} on ${input.endpoint} refused: the new certificate no longer covers ${dropped.join(", ")}, which the served one covers`,
		{
			context: { endpoint: input.endpoint, ref: input.ref, operation: "runtime-set" },
			hint: "issue a certificate that keeps every served name, or set allow_name_removal: true on the target",
		},
	);
}
