/** Read-only comparison of a target directory with a desired file set (used by sync and by plan). */
import type { Stats } from "node:fs";
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";
import { DATA_LINK } from "./names.js";
import type { DesiredFiles, Owner } from "./types.js";

export interface DirectoryDiff {
	exists: boolean;
	/** One line per difference; empty when the target already holds exactly `files`. */
	differences: string[];
	/** Only the directory's own mode/owner differ: fixable in place, no new version needed. */
	metadataOnly: boolean;
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
	const top = await lstatOrUndefined(target);
	if (top === undefined)
		return { exists: false, differences: ["target does not exist"], metadataOnly: false };
	if (!top.isDirectory())
		return { exists: true, differences: ["target is not a directory"], metadataOnly: false };
	const contentDifferences =
		options.swap === "exchange"
			? await compareFiles(target, files, options.owner)
			: await compareSymlinkLayout(target, files, options.owner);
	const metaDifferences = compareMeta(top, "target directory", options.dirMode, options.owner);
	return {
		exists: true,
		differences: [...contentDifferences, ...metaDifferences],
		metadataOnly: contentDifferences.length === 0 && metaDifferences.length > 0,
	};
}

function compareMeta(st: Stats, what: string, mode: number | undefined, owner: Owner | undefined): string[] {
	const out: string[] = [];
	if (mode !== undefined && (st.mode & 0o7777) !== (mode & 0o7777)) {
		out.push(`${what}: mode ${octal(st.mode)}, want ${octal(mode)}`);
	}
	if (owner !== undefined && (st.uid !== owner.uid || st.gid !== owner.gid)) {
		out.push(`${what}: owner ${st.uid}:${st.gid}, want ${owner.uid}:${owner.gid}`);
	}
	return out;
}

async function compareFiles(dir: string, files: DesiredFiles, owner: Owner | undefined): Promise<string[]> {
	const out: string[] = [];
	const present = await readdir(dir);
	for (const name of present) if (!Object.hasOwn(files, name)) out.push(`${name}: not wanted`);
	for (const [name, want] of Object.entries(files)) {
		const st = await lstatOrUndefined(join(dir, name));
		if (st === undefined) out.push(`${name}: missing`);
		else if (!st.isFile()) out.push(`${name}: not a regular file`);
		else {
			out.push(...compareMeta(st, name, want.mode, owner));
			if (!(await sameContent(join(dir, name), st, want.content))) out.push(`${name}: content differs`);
		}
	}
	return out;
}

async function compareSymlinkLayout(target: string, files: DesiredFiles, owner: Owner | undefined) {
	const version = await readlink(join(target, DATA_LINK)).catch(() => undefined);
	if (version === undefined || !version.startsWith("..") || version.includes("/")) {
		return [`${DATA_LINK}: missing or not a version link`];
	}
	const out = await compareFiles(join(target, version), files, owner);
	const present = await readdir(target);
	for (const name of present) {
		if (!name.startsWith("..") && !Object.hasOwn(files, name)) out.push(`${name}: not wanted`);
	}
	for (const name of Object.keys(files)) {
		const link = await readlink(join(target, name)).catch(() => undefined);
		if (link !== `${DATA_LINK}/${name}`) out.push(`${name}: not a link to ${DATA_LINK}/${name}`);
	}
	return out;
}

async function sameContent(path: string, st: Stats, want: string | Uint8Array): Promise<boolean> {
	const bytes = typeof want === "string" ? Buffer.from(want) : want;
	if (st.size !== bytes.byteLength) return false;
	return Buffer.compare(await readFile(path), bytes) === 0;
}

export async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
	try {
		return await lstat(path);
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
		throw e;
	}
}
