/**
 * One file replaced atomically: temp file beside it, fsync, rename, fsync the directory. A reader that
 * opens the file once always gets one whole version (the strongest reader tier, used by haproxy-pem). Through
 * the directory's descriptor (never through a symlink, under the lock); the temp names are base/atomic-file.ts's.
 */
import type { Stats } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { isTempOf, tempName } from "../base/atomic-file.js";
import { CertificateeError, describeError } from "../errors.js";
import { lstatOrUndefined, sameContent } from "./compare.js";
import { leftoverNote } from "./context.js";
import { lstatAt, readRegularAt, syncFd, withFdAsync, writeNewFileAt } from "./dirfd.js";
import { openParent, removeOrReport, removeStale } from "./fsutil.js";
import { lockFile, requireNative } from "./lock.js";
import { checkFileName, lockName, siblingsOf } from "./names.js";
import type { AtCalls, NativeBinding } from "./renameat2.js";
import type { DesiredFile, Owner, SyncStep } from "./types.js";

export interface FileSyncOptions {
	owner?: Owner;
	durable?: boolean;
	lockTimeoutMs?: number;
	onStep?: (step: SyncStep) => void;
	binding?: NativeBinding;
	/** As SyncOptions.allowWritableParent, for the directory holding the file. */
	allowWritableParent?: boolean;
}

export interface FileSyncResult {
	path: string;
	status: "unchanged" | "written";
	/** What differed: "missing", "content differs", "mode 0644, want 0600". */
	differences: string[];
	problems: CertificateeError[];
}

/**
 * Idempotent like syncDirectory; locks the directory holding the file (lock file beside that directory).
 * Works in the directory held open: the temp file is created there (never through a symlink) and renamed.
 */
export async function writeFileAtomic(
	path: string,
	file: DesiredFile,
	options: FileSyncOptions = {},
): Promise<FileSyncResult> {
	const full = resolve(path);
	const dir = dirname(full);
	const name = basename(full);
	checkFileName(name, dir);
	const binding = options.binding ?? (await requireNative(full));
	const at = binding.at;
	const siblings = siblingsOf(dir);
	const durable = options.durable ?? true;
	return withFdAsync(openParent(siblings.parent, full, true), async (lockDir) => {
		const lock = await lockFile(
			lockDir,
			lockName(siblings),
			siblings.lock,
			full,
			options.lockTimeoutMs ?? 10_000,
			binding,
		);
		try {
			return await withFdAsync(openParent(dir, full, options.allowWritableParent ?? false), async (fd) => {
				const held = { fd, path: dir };
				const problems = removeStale(at, held, (n) => isTempOf(n, name), full);
				const differences = diffFileAt(at, fd, name, file, options.owner);
				if (differences.length === 0)
					return { path: full, status: "unchanged" as const, differences, problems };
				const tmp = tempName(name);
				try {
					await writeNewFileAt(at, fd, tmp, file, options.owner, durable);
					options.onStep?.("staging-synced");
					at.rename(fd, tmp, fd, name);
				} catch (e) {
					const note = leftoverNote(removeOrReport(at, held, tmp, full));
					throw new CertificateeError(
						"ATOMICDIR_SWAP_FAILED",
						`cannot replace ${full}: ${describeError(e)}; old content kept${note}`,
						{ context: { file: full }, hint: "certificatee needs write access to the directory", cause: e },
					);
				}
				options.onStep?.("swapped");
				await syncFd(fd, durable).catch((e: unknown) =>
					problems.push(
						new CertificateeError("ATOMICDIR_SWAP_FAILED", `${full} replaced, but fsync of ${dir} failed`, {
							context: { file: full },
							hint: "it may not survive a power loss",
							cause: e,
						}),
					),
				);
				return { path: full, status: "written" as const, differences, problems };
			});
		} finally {
			await lock.release();
		}
	});
}

/** Read-only: what differs between the file at `path` and `want` (empty when equal). For plan. */
export function diffFile(path: string, want: DesiredFile, owner?: Owner): string[] {
	const full = resolve(path);
	const st = lstatOrUndefined(full);
	return fileDifferences(st, want, owner, () => sameContent(full, st as Stats, want.content));
}

function diffFileAt(at: AtCalls, dir: number, name: string, want: DesiredFile, owner?: Owner): string[] {
	const st = lstatAt(at, dir, name);
	return fileDifferences(st, want, owner, () => {
		const bytes = typeof want.content === "string" ? Buffer.from(want.content) : want.content;
		const content = (st as Stats).size === bytes.byteLength ? readRegularAt(at, dir, name) : undefined;
		return content !== undefined && Buffer.compare(content, bytes) === 0;
	});
}

function fileDifferences(
	st: Stats | undefined,
	want: DesiredFile,
	owner: Owner | undefined,
	same: () => boolean,
): string[] {
	if (st === undefined) return ["missing"];
	if (!st.isFile()) return ["not a regular file"];
	const out: string[] = [];
	if ((st.mode & 0o7777) !== (want.mode & 0o7777)) {
		out.push(`mode 0${(st.mode & 0o7777).toString(8)}, want 0${(want.mode & 0o7777).toString(8)}`);
	}
	if (owner !== undefined && (st.uid !== owner.uid || st.gid !== owner.gid)) {
		out.push(`owner ${st.uid}:${st.gid}, want ${owner.uid}:${owner.gid}`);
	}
	if (!same()) out.push("content differs");
	return out;
}
