/** Read-only comparison of a target directory with a desired file set (used by sync and by plan). */
import { constants, fstatSync, lstatSync, openSync, readFileSync, type Stats } from "node:fs";
import { basename, dirname } from "node:path";
import { CertificateeError } from "../errors.js";
import { DIRECTORY_FLAGS, isErrno, listAt, lstatAt, readlinkAt, readRegularAt, withFd } from "./dirfd.js";
import { DATA_LINK } from "./names.js";
import { type AtCalls, loadNativeBinding } from "./renameat2.js";
import type { DesiredFiles, Owner } from "./types.js";

export interface DirectoryDiff {
	exists: boolean;
	/** One line per difference; empty when the target already holds exactly `files`. */
	differences: string[];
}

export interface DiffOptions {
	swap: "exchange" | "symlink";
	dirMode?: number;
	owner?: Owner;
}

const octal = (mode: number) => `0${(mode & 0o7777).toString(8)}`;

/**
 * Compares names, bytes, modes (and owner when given). Never writes, never follows a symlink below the
 * target (a link where a file should be is a difference), never opens a FIFO or device for reading.
 */
export async function diffDirectory(
	target: string,
	files: DesiredFiles,
	options: DiffOptions,
): Promise<DirectoryDiff> {
	const native = await loadNativeBinding();
	if (!native.ok) {
		throw new CertificateeError("ATOMICDIR_UNSUPPORTED", `cannot read ${target}: ${native.reason}`, {
			context: { target },
			hint: "directory targets need Linux with glibc (flock and renameat2 through koffi)",
		});
	}
	let parent: number;
	try {
		parent = openSync(dirname(target), constants.O_RDONLY | constants.O_DIRECTORY);
	} catch (e) {
		if (isErrno(e, "ENOENT")) return { exists: false, differences: ["target does not exist"] };
		throw e;
	}
	return withFd(parent, (fd) => diffDirectoryAt(native.binding.at, fd, basename(target), files, options));
}

/** diffDirectory for the entry `name` of the open directory `parent`. */
export function diffDirectoryAt(
	at: AtCalls,
	parent: number,
	name: string,
	files: DesiredFiles,
	options: DiffOptions,
): DirectoryDiff {
	const top = lstatAt(at, parent, name);
	if (top === undefined) return { exists: false, differences: ["target does not exist"] };
	if (!top.isDirectory()) return { exists: true, differences: ["target is not a directory"] };
	return withFd(at.open(parent, name, DIRECTORY_FLAGS), (fd) => {
		const content =
			options.swap === "exchange"
				? compareFiles(at, fd, files, options.owner)
				: compareSymlinkLayout(at, fd, files, options.owner);
		return { exists: true, differences: [...content, ...compareMeta(top, "target directory", options)] };
	});
}

function compareMeta(
	st: Stats,
	what: string,
	want: { mode?: number; dirMode?: number; owner?: Owner },
): string[] {
	const out: string[] = [];
	const mode = want.mode ?? want.dirMode;
	if (mode !== undefined && (st.mode & 0o7777) !== (mode & 0o7777)) {
		out.push(`${what}: mode ${octal(st.mode)}, want ${octal(mode)}`);
	}
	const owner = want.owner;
	if (owner !== undefined && (st.uid !== owner.uid || st.gid !== owner.gid)) {
		out.push(`${what}: owner ${st.uid}:${st.gid}, want ${owner.uid}:${owner.gid}`);
	}
	return out;
}

function compareFiles(at: AtCalls, dir: number, files: DesiredFiles, owner: Owner | undefined): string[] {
	const out: string[] = [];
	for (const name of listAt(dir)) if (!Object.hasOwn(files, name)) out.push(`${name}: not wanted`);
	for (const [name, want] of Object.entries(files)) {
		const st = lstatAt(at, dir, name);
		if (st === undefined) out.push(`${name}: missing`);
		else if (!st.isFile()) out.push(`${name}: not a regular file`);
		else {
			out.push(...compareMeta(st, name, { mode: want.mode, owner }));
			if (!sameBytes(st, want.content, () => readRegularAt(at, dir, name)))
				out.push(`${name}: content differs`);
		}
	}
	return out;
}

function compareSymlinkLayout(
	at: AtCalls,
	target: number,
	files: DesiredFiles,
	owner: Owner | undefined,
): string[] {
	const version = readlinkAt(at, target, DATA_LINK);
	if (version === undefined || !version.startsWith("..") || version.includes("/")) {
		return [`${DATA_LINK}: missing or not a version link`];
	}
	let versionFd: number;
	try {
		versionFd = at.open(target, version, DIRECTORY_FLAGS);
	} catch (e) {
		if (isErrno(e, "ENOENT", "ELOOP", "ENOTDIR")) return [`${DATA_LINK}: names no version directory`];
		throw e;
	}
	const out = withFd(versionFd, (fd) => compareFiles(at, fd, files, owner));
	for (const name of listAt(target)) {
		if (!name.startsWith("..") && !Object.hasOwn(files, name)) out.push(`${name}: not wanted`);
	}
	for (const name of Object.keys(files)) {
		if (readlinkAt(at, target, name) !== `${DATA_LINK}/${name}`) {
			out.push(`${name}: not a link to ${DATA_LINK}/${name}`);
		}
	}
	return out;
}

/** Same bytes as `want`: sizes first, then the content (`read` gives undefined when it is no regular file). */
function sameBytes(st: Stats, want: string | Uint8Array, read: () => Buffer | undefined): boolean {
	const bytes = typeof want === "string" ? Buffer.from(want) : want;
	if (st.size !== bytes.byteLength) return false;
	const content = read();
	return content !== undefined && Buffer.compare(content, bytes) === 0;
}

/** Same bytes as the file at `path` (its last name never followed, a FIFO never read). */
export function sameContent(path: string, st: Stats, want: string | Uint8Array): boolean {
	return sameBytes(st, want, () => {
		const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
		return withFd(openSync(path, flags), (fd) => (fstatSync(fd).isFile() ? readFileSync(fd) : undefined));
	});
}

export function lstatOrUndefined(path: string): Stats | undefined {
	try {
		return lstatSync(path);
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
		throw e;
	}
}
