/** Read-only comparison of a target directory with a desired file set (used by sync and by plan). */
import { lstatSync, readdirSync, readFileSync, readlinkSync, type Stats } from "node:fs";
import { join } from "node:path";
import { DATA_LINK } from "./names.js";
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

/** Compares names, bytes, modes (and owner when given). Never writes. */
export async function diffDirectory(
	target: string,
	files: DesiredFiles,
	options: DiffOptions,
): Promise<DirectoryDiff> {
	return diffDirectorySync(target, files, options);
}

function diffDirectorySync(target: string, files: DesiredFiles, options: DiffOptions): DirectoryDiff {
	const top = lstatOrUndefined(target);
	if (top === undefined) return { exists: false, differences: ["target does not exist"] };
	if (!top.isDirectory()) return { exists: true, differences: ["target is not a directory"] };
	const content =
		options.swap === "exchange"
			? compareFiles(target, files, options.owner)
			: compareSymlinkLayout(target, files, options.owner);
	return { exists: true, differences: [...content, ...compareMeta(top, "target directory", options)] };
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

function compareFiles(dir: string, files: DesiredFiles, owner: Owner | undefined): string[] {
	const out: string[] = [];
	for (const name of readdirSync(dir)) if (!Object.hasOwn(files, name)) out.push(`${name}: not wanted`);
	for (const [name, want] of Object.entries(files)) {
		const path = join(dir, name);
		const st = lstatOrUndefined(path);
		if (st === undefined) out.push(`${name}: missing`);
		else if (!st.isFile()) out.push(`${name}: not a regular file`);
		else {
			out.push(...compareMeta(st, name, { mode: want.mode, owner }));
			if (!sameContent(path, st, want.content)) out.push(`${name}: content differs`);
		}
	}
	return out;
}

function compareSymlinkLayout(target: string, files: DesiredFiles, owner: Owner | undefined): string[] {
	const version = readlinkOrUndefined(join(target, DATA_LINK));
	if (version === undefined || !version.startsWith("..") || version.includes("/")) {
		return [`${DATA_LINK}: missing or not a version link`];
	}
	const out = compareFiles(join(target, version), files, owner);
	for (const name of readdirSync(target)) {
		if (!name.startsWith("..") && !Object.hasOwn(files, name)) out.push(`${name}: not wanted`);
	}
	for (const name of Object.keys(files)) {
		if (readlinkOrUndefined(join(target, name)) !== `${DATA_LINK}/${name}`) {
			out.push(`${name}: not a link to ${DATA_LINK}/${name}`);
		}
	}
	return out;
}

/** Same bytes as `want`: sizes first, then the content. */
export function sameContent(path: string, st: Stats, want: string | Uint8Array): boolean {
	const bytes = typeof want === "string" ? Buffer.from(want) : want;
	if (st.size !== bytes.byteLength) return false;
	return Buffer.compare(readFileSync(path), bytes) === 0;
}

export function lstatOrUndefined(path: string): Stats | undefined {
	try {
		return lstatSync(path);
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
		throw e;
	}
}

export function readlinkOrUndefined(path: string): string | undefined {
	try {
		return readlinkSync(path);
	} catch {
		return undefined;
	}
}
