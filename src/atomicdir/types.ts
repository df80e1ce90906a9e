/** Plain data in and out of syncDirectory. */
import type { CertificateeError } from "../errors.js";
import type { NativeBinding } from "./renameat2.js";

/** One file of the desired set: its bytes and its mode (e.g. 0o600 for keys). */
export interface DesiredFile {
	content: string | Uint8Array;
	mode: number;
}

/** Plain file name -> file. */
export type DesiredFiles = Readonly<Record<string, DesiredFile>>;

/**
 * How a new version is published:
 * - exchange: the target is a real directory, replaced whole by renameat2(RENAME_EXCHANGE) (Linux).
 * - symlink: kubelet layout inside the target (versioned dirs, `..data` symlink flipped by rename,
 *   one stable symlink per file); for filesystems without RENAME_EXCHANGE or mount points.
 * - exchange-or-symlink: exchange where the filesystem supports it, symlink where it does not.
 */
export type SwapMethod = "exchange" | "symlink" | "exchange-or-symlink";

export interface Owner {
	uid: number;
	gid: number;
}

/** The points between the steps of a sync, in order; `onStep` sees each one (tests kill the process there). */
export type SyncStep =
	| "locked"
	| "staging-created"
	| "file-written"
	| "staging-synced"
	| "swapped"
	| "parent-synced"
	| "cleaned"
	| "data-flipped"
	| "links-updated";

export interface SyncOptions {
	/** Default "exchange". */
	swap?: SwapMethod;
	/** Mode of the target directory. Default: the current target's mode, or 0o755 for a new one. */
	dirMode?: number;
	/** Owner of the directory and files (needs root). Default: the current target's owner when root. */
	owner?: Owner;
	/** How long to wait for another writer's lock. Default 10 s. */
	lockTimeoutMs?: number;
	/** fsync files and directories (default true). Only benchmarks and tests turn it off. */
	durable?: boolean;
	/** Called between steps (tests inject crashes and faults here). */
	onStep?: (step: SyncStep) => void;
	/** Replaces the native calls (tests inject EINVAL/EXDEV here when they can't mount). */
	binding?: NativeBinding;
	/** Clock for version names of the symlink layout. */
	now?: Date;
	/**
	 * Write even when another account can write the target's parent (ATOMICDIR_UNSAFE_PARENT otherwise).
	 * That account can then replace what is published, never redirect certificatee's writes.
	 */
	allowWritableParent?: boolean;
}

export interface SyncResult {
	target: string;
	status: "unchanged" | "written";
	/** The method actually used (exchange-or-symlink resolves to one of them). */
	swap: "exchange" | "symlink";
	/** True when the target did not exist before. */
	first: boolean;
	/** What differed (empty when unchanged): "tls.key: content differs". */
	differences: string[];
	/**
	 * Failures after the new version was published (parent fsync, removing the old version or stale staging).
	 * The new content is live; these need an operator's attention but must not be mistaken for a failed sync.
	 */
	problems: CertificateeError[];
}
