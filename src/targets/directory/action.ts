/** What a directory target writes: plain data, no I/O. */
import type { Bundle } from "../../certificates/types.js";
import type { OpEffect } from "../../reconcile/audit.js";

/**
 * A single write of a directory target (its ref is the set's path): publish a certificate's files as one set,
 * or run the target's on_change command for it.
 */
export type DirectoryAction =
	| { op: "directory-write"; ref: string; certificate: string; bundle: Bundle }
	| { op: "on-change"; ref: string; certificate: string };

/** How each write shows in the audit trail: a hook run writes no certificate content. */
const EFFECTS: Record<DirectoryAction["op"], OpEffect> = { "directory-write": "write", "on-change": "none" };

export const directoryEffect = (op: string): OpEffect | undefined =>
	Object.hasOwn(EFFECTS, op) ? EFFECTS[op as DirectoryAction["op"]] : undefined;
