/**
 * One file replaced atomically: temp file beside it, fsync, rename, fsync the directory. A reader that
 * opens the file once always gets one whole version (the strongest reader tier, used by haproxy-pem).
 */
import { renameSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { CertificateeError, describeError } from "../errors.js";
import { lstatOrUndefined, sameContent } from "./compare.js";
import { leftoverNote } from "./context.js";
import { removeOrReport, removeStale, syncDirectoryEntry, writeNewFile } from "./fsutil.js";
import { lockFile } from "./lock.js";
import { checkFileName, randomTag, siblingsOf } from "./names.js";
import type { NativeBinding } from "./renameat2.js";
import type { DesiredFile, Owner, SyncStep } from "./types.js";

export interface FileSyncOptions {
	owner?: Owner;
	durable?: boolean;
	lockTimeoutMs?: number;
	onStep?: (step: SyncStep) => void;
	binding?: NativeBinding;
}

export interface FileSyncResult {
	path: string;
	status: "unchanged" | "written";
	/** What differed: "missing", "content differs", "mode 0644, want 0600". */
	differences: string[];
	problems: CertificateeError[];
}

/** Idempotent like syncDirectory; locks the directory holding the file (lock file beside that directory). */
export async function writeFileAtomic(
	path: string,
	file: DesiredFile,
	options: FileSyncOptions = {},
): Promise<FileSyncResult> {
	const full = resolve(path);
	const dir = dirname(full);
	const name = basename(full);
	checkFileName(name, dir);
	const lock = await lockFile(siblingsOf(dir).lock, full, options.lockTimeoutMs ?? 10_000, options.binding);
	try {
		const prefix = `.${name}.atomicdir-tmp-`;
		const problems = removeStale(dir, (n) => n.startsWith(prefix), full);
		const differences = diffFile(full, file, options.owner);
		if (differences.length === 0) return { path: full, status: "unchanged", differences, problems };
		const tmp = join(dir, `${prefix}${randomTag()}`);
		try {
			await writeNewFile(tmp, file, options.owner, options.durable ?? true);
			options.onStep?.("staging-synced");
			renameSync(tmp, full);
		} catch (e) {
			const note = leftoverNote(removeOrReport(tmp, full));
			throw new CertificateeError(
				"ATOMICDIR_SWAP_FAILED",
				`cannot replace ${full}: ${describeError(e)}; old content kept${note}`,
				{
					context: { file: full },
					hint: "certificatee needs write access to the directory",
					cause: e,
				},
			);
		}
		options.onStep?.("swapped");
		await syncDirectoryEntry(dir, options.durable ?? true).catch((e: unknown) =>
			problems.push(
				new CertificateeError("ATOMICDIR_SWAP_FAILED", `${full} replaced, but fsync of ${dir} failed`, {
					context: { file: full },
					hint: "it may not survive a power loss",
					cause: e,
				}),
			),
		);
		return { path: full, status: "written", differences, problems };
	} finally {
		await lock.release();
	}
}

/** Read-only: what differs between the file at `path` and `want` (empty when equal). For plan. */
export function diffFile(path: string, want: DesiredFile, owner?: Owner): string[] {
	const st = lstatOrUndefined(resolve(path));
	if (st === undefined) return ["missing"];
	if (!st.isFile()) return ["not a regular file"];
	const out: string[] = [];
	if ((st.mode & 0o7777) !== (want.mode & 0o7777)) {
		out.push(`mode 0${(st.mode & 0o7777).toString(8)}, want 0${(want.mode & 0o7777).toString(8)}`);
	}
	if (owner !== undefined && (st.uid !== owner.uid || st.gid !== owner.gid)) {
		out.push(`owner ${st.uid}:${st.gid}, want ${owner.uid}:${owner.gid}`);
	}
	if (!sameContent(path, st, want.content)) out.push("content differs");
	return out;
}
