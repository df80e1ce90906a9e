/**
 * crt-list files as text, shared by both HAProxy target kinds. Pure: no I/O.
 *
 * `del ssl crt-list` and `add ssl crt-list` change HAProxy's memory only; a reload re-reads the file. These
 * helpers edit the file's text so it says what memory says, touching nothing but the lines they remove or
 * append: options in `[...]`, SNI filters, comments, blank lines, order, CRLF and the trailing-newline state
 * stay byte for byte.
 */
import { posix } from "node:path";

/** How a crt-list line names its certificate, and how HAProxy resolved that name. */
export interface CrtListPathContext {
	/** The crt-list file, as HAProxy names it (`show ssl crt-list`). */
	listPath: string;
	/** HAProxy's `crt-base`, when known: relative certificate paths are resolved against it. */
	crtBase?: string;
}

/**
 * The certificate path of one crt-list line; undefined for empty lines and comments. As HAProxy 2.6 reads
 * it: a comment starts with "#" in the first column (an indented "#" is taken for a file name).
 */
export function linePath(line: string): string | undefined {
	const text = line.replace(/\r?\n$/, "");
	if (text.startsWith("#")) return undefined;
	return /^\s*(\S+)/.exec(text)?.[1];
}

/**
 * Does a path written in a crt-list name HAProxy's certificate `runtimeName`? Equal as written, or, for a
 * relative path, once resolved against crt-base or against the list's own directory.
 */
export function namesCertificate(path: string, runtimeName: string, context: CrtListPathContext): boolean {
	if (path === runtimeName) return true;
	if (posix.isAbsolute(path)) return posix.normalize(path) === posix.normalize(runtimeName);
	const bases = [context.crtBase, posix.dirname(context.listPath)].filter((b): b is string => !!b);
	return bases.some((base) => posix.join(base, path) === posix.normalize(runtimeName));
}

/** Lines of a text with their own line endings ("a\n", "b\r\n", "c"): joined, they are the text again. */
function splitKeepingEnds(text: string): string[] {
	return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

export interface LineEdit {
	text: string;
	/** The lines taken out, without their line ending. */
	removed: string[];
}

/** Removes every line that names `runtimeName`; every other byte stays. */
export function removeCertificateLines(
	text: string,
	runtimeName: string,
	context: CrtListPathContext,
): LineEdit {
	const lines = splitKeepingEnds(text);
	const kept: string[] = [];
	const removed: string[] = [];
	for (const line of lines) {
		const path = linePath(line);
		if (path !== undefined && namesCertificate(path, runtimeName, context)) {
			removed.push(line.replace(/\r?\n$/, ""));
		} else kept.push(line);
	}
	if (removed.length === 0) return { text, removed };
	let out = kept.join("");
	// The last line went and the text had no final newline: neither has the result.
	if (!text.endsWith("\n")) out = out.replace(/\r?\n$/, "");
	return { text: out, removed };
}

/**
 * Every line of a crt-list text, indexed by each name HAProxy could have resolved its path to (as written,
 * normalised, and for a relative path against crt-base and the list's directory): one pass for a whole list.
 */
export function linesByCertificate(text: string, context: CrtListPathContext): Map<string, string[]> {
	const index = new Map<string, string[]>();
	for (const raw of splitKeepingEnds(text)) {
		const path = linePath(raw);
		if (path === undefined) continue;
		const line = raw.replace(/\r?\n$/, "");
		const bases = posix.isAbsolute(path)
			? []
			: [context.crtBase, posix.dirname(context.listPath)].filter((b): b is string => !!b);
		const names = new Set([path, posix.normalize(path), ...bases.map((b) => posix.join(b, path))]);
		for (const name of names) index.set(name, [...(index.get(name) ?? []), line]);
	}
	return index;
}

/** The line that adds a certificate: its path, then `[options]`, then SNI filters. */
export function crtListLine(entry: { file: string; options?: string; filters?: readonly string[] }): string {
	return [entry.file, ...(entry.options ? [`[${entry.options}]`] : []), ...(entry.filters ?? [])].join(" ");
}

/** Appends one line; the file's line-ending style (LF or CRLF) and trailing-newline state are kept. */
export function appendLine(text: string, line: string): string {
	const eol = /\r\n/.test(text) ? "\r\n" : "\n";
	if (text === "") return `${line}${eol}`;
	return text.endsWith("\n") ? `${text}${line}${eol}` : `${text}${eol}${line}`;
}

/**
 * The lines that name `runtimeName`, or might: a relative path with the same file name that resolves
 * elsewhere only for want of HAProxy's crt-base. Before a certificate file is deleted, a "might" counts.
 */
export function linesMaybeNaming(text: string, runtimeName: string, context: CrtListPathContext): string[] {
	const file = posix.basename(runtimeName);
	return splitKeepingEnds(text)
		.map((line) => line.replace(/\r?\n$/, ""))
		.filter((line) => {
			const path = linePath(line);
			if (path === undefined) return false;
			if (namesCertificate(path, runtimeName, context)) return true;
			return !posix.isAbsolute(path) && context.crtBase === undefined && posix.basename(path) === file;
		});
}

/**
 * Is a crt-list HAProxy reports a crt directory (`crt <dir>`) rather than a file? A directory list is named
 * by the directory, and every certificate in it lives under that path; no file's entries can.
 */
export function isCrtDirectory(
	list: string,
	entries: ReadonlyArray<{ file: string }>,
	knownDirectories: readonly string[] = [],
): boolean {
	const name = list.replace(/\/+$/, "");
	if (knownDirectories.some((d) => d.replace(/\/+$/, "") === name)) return true;
	return entries.some((e) => e.file.startsWith(`${name}/`));
}
