/** File and sibling names atomicdir uses, and the check that a caller's file names are plain. */
import { basename, dirname, join } from "node:path";
import { CertificateeError } from "../errors.js";

/** Refuses anything but a plain file name: no "/", no NUL, not empty, not "." or "..", no leading "..". */
export function checkFileName(name: string, target: string): void {
	const why =
		name.length === 0
			? "is empty"
			: name.includes("/") || name.includes("\\")
				? "contains a path separator"
				: name.includes("\0")
					? "contains a NUL byte"
					: name === "." || name === ".."
						? "is a directory reference"
						: name.startsWith("..")
							? 'starts with ".." (reserved for the symlink layout)'
							: Buffer.byteLength(name) > 255
								? "is longer than 255 bytes"
								: undefined;
	if (why === undefined) return;
	throw new CertificateeError("ATOMICDIR_BAD_NAME", `file name ${JSON.stringify(name)} ${why}`, {
		context: { file: join(target, "<name>"), field: "files" },
		hint: "file names in a synced directory must be plain names such as tls.crt",
	});
}

/** Names of the siblings of a target, all in the target's parent (same filesystem). */
export interface Siblings {
	parent: string;
	base: string;
	lock: string;
	stagingPrefix: string;
}

export function siblingsOf(target: string): Siblings {
	const parent = dirname(target);
	const base = basename(target);
	return {
		parent,
		base,
		lock: join(parent, `.${base}.lock`),
		stagingPrefix: `.${base}.atomicdir-staging-`,
	};
}

/** The lock file's name in the parent. */
export function lockName(siblings: Siblings): string {
	return `.${siblings.base}.lock`;
}

export function randomTag(): string {
	return `${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}

/** A version directory name of the symlink layout, kubelet style: ..2026_11_30_10_00_00.<random>. */
export function versionName(now: Date): string {
	const p = (n: number) => String(n).padStart(2, "0");
	const stamp = `${now.getUTCFullYear()}_${p(now.getUTCMonth() + 1)}_${p(now.getUTCDate())}_${p(now.getUTCHours())}_${p(now.getUTCMinutes())}_${p(now.getUTCSeconds())}`;
	return `..${stamp}.${randomTag()}`;
}

export const DATA_LINK = "..data";
export const DATA_LINK_TMP = "..data_tmp";
