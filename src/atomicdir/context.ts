/** What one sync knows while it holds the lock, passed to either layout. */
import type { Stats } from "node:fs";
import { CertificateeError, describeError } from "../errors.js";
import { lstatAt } from "./dirfd.js";
import type { AtCalls, NativeBinding } from "./renameat2.js";
import type { DesiredFiles, Owner, SyncOptions, SyncStep } from "./types.js";

export interface SyncContext {
	target: string;
	parent: string;
	/** The parent, held open for the whole sync: every name below is looked up in it. */
	parentFd: number;
	/** The target's name in its parent. */
	name: string;
	stagingPrefix: string;
	files: DesiredFiles;
	binding: NativeBinding;
	at: AtCalls;
	dirMode: number | undefined;
	owner: Owner | undefined;
	durable: boolean;
	now: Date;
	step(step: SyncStep): void;
}

export function contextFrom(
	target: string,
	parent: { path: string; fd: number; name: string },
	stagingPrefix: string,
	files: DesiredFiles,
	binding: NativeBinding,
	options: SyncOptions,
): SyncContext {
	return {
		target,
		parent: parent.path,
		parentFd: parent.fd,
		name: parent.name,
		stagingPrefix,
		files,
		binding,
		at: binding.at,
		dirMode: options.dirMode,
		owner: options.owner,
		durable: options.durable ?? true,
		now: options.now ?? new Date(),
		step: options.onStep ?? (() => {}),
	};
}

/**
 * The directory owner to re-apply: the configured one, else (as root) the current target's. Only a parent
 * no other account can write (or one the operator allowed) gets here, so that target was not planted.
 */
export function directoryOwner(ctx: SyncContext, current: { uid: number; gid: number } | undefined) {
	if (ctx.owner !== undefined) return ctx.owner;
	if (current !== undefined && process.getuid?.() === 0) return { uid: current.uid, gid: current.gid };
	return undefined;
}

/** A failure before the new version was published: the old content is intact. */
export function writeFailed(
	ctx: SyncContext,
	what: string,
	cause: unknown,
	leftovers: CertificateeError[] = [],
): CertificateeError {
	const code = (cause as NodeJS.ErrnoException | undefined)?.code;
	const hint =
		code === "EROFS"
			? "the filesystem holding the target is read-only"
			: code === "EACCES" || code === "EPERM"
				? "certificatee needs write access to the target's parent directory (and root to set an owner)"
				: code === "ENOSPC" || code === "EDQUOT"
					? "the filesystem is full"
					: "check the target path and its parent directory";
	return new CertificateeError(
		"ATOMICDIR_SWAP_FAILED",
		`${what}: ${describeError(cause)}; old content kept${leftoverNote(leftovers)}`,
		{
			context: { target: ctx.target },
			hint,
			retryable: code !== "EROFS",
			cause,
		},
	);
}

/** Cleanup failures while giving up are part of the thrown error's message, never dropped. */
export function leftoverNote(leftovers: CertificateeError[]): string {
	return leftovers.length === 0 ? "" : ` (and ${leftovers.map((l) => l.message).join("; ")})`;
}

/** The target's current stat: undefined when absent; anything but a directory is refused. */
export function currentTarget(ctx: SyncContext): Stats | undefined {
	const current = lstatAt(ctx.at, ctx.parentFd, ctx.name);
	if (current !== undefined && !current.isDirectory()) {
		throw new CertificateeError("ATOMICDIR_SWAP_FAILED", `${ctx.target} exists and is not a directory`, {
			context: { target: ctx.target },
			hint: "point the target at a directory certificatee owns, or remove what is there",
		});
	}
	return current;
}
