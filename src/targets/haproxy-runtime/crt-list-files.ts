/**
 * crt-list files on the node's disk, for the haproxy-runtime target. HAProxy re-reads them at every reload,
 * so a runtime `add`/`del ssl crt-list` is made to last by editing the file too (atomically, every other byte
 * kept: ../haproxy/crt-list.ts). Which lists are files, and which of their lines name which certificate, is read here
 * during observe so that `plan` can decide from plain data.
 */
import { statSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { isAbsolute, posix } from "node:path";
import { writeFileAtomic } from "../../base/atomic-file.js";
import { CertificateeError } from "../../errors.js";
import { crtListLine, isCrtDirectory, linePath, linesByCertificate } from "../haproxy/crt-list.js";
import type { ObservedCrtList } from "../haproxy/engine/model.js";
import type { CrtListEntry } from "./parse.js";

/**
 * What one crt-list HAProxy reports is on this machine. A file is editable when HAProxy names it by an
 * absolute path that is a regular file here; its lines naming each of `certificates` are read from disk.
 * Otherwise (a relative name: HAProxy's working directory is unknown) the lines are those HAProxy shows.
 */
export async function describeCrtList(
	name: string,
	entries: readonly CrtListEntry[],
	certificates: readonly string[],
	crtDirectories: readonly string[],
): Promise<ObservedCrtList> {
	if (isCrtDirectory(name, entries, crtDirectories)) return { name, kind: "directory", editable: false };
	const s = isAbsolute(name) ? await stat(name).catch(() => undefined) : undefined;
	if (s?.isDirectory()) return { name, kind: "directory", editable: false };
	const lines: Record<string, string[]> = {};
	if (s?.isFile()) {
		const text = await readFile(name, "utf8");
		const index = linesByCertificate(text, { listPath: name });
		for (const cert of certificates) {
			const naming = index.get(cert) ?? index.get(posix.normalize(cert));
			if (naming) lines[cert] = naming;
		}
		const unresolved = unresolvedLines(text);
		return { name, kind: "file", editable: true, lines, ...(unresolved.length > 0 ? { unresolved } : {}) };
	}
	for (const e of entries) {
		if (!certificates.includes(e.file)) continue;
		lines[e.file] = [
			...(lines[e.file] ?? []),
			crtListLine({ file: e.file, ...(e.options ? { options: e.options } : {}), filters: e.filters }),
		];
	}
	return { name, kind: "file", editable: false, lines };
}

/**
 * The lines whose certificate file does not exist (absolute paths only: a relative one resolves against a
 * crt-base certificatee is not told). HAProxy's next reload fails on such a line (`unable to stat SSL
 * certificate`), whatever the running worker holds.
 */
function unresolvedLines(text: string): Array<{ line: number; file: string }> {
	const out: Array<{ line: number; file: string }> = [];
	for (const [i, raw] of text.split("\n").entries()) {
		const file = linePath(raw);
		if (file === undefined || !isAbsolute(file)) continue;
		if (!statSync(file, { throwIfNoEntry: false })?.isFile()) out.push({ line: i + 1, file });
	}
	return out;
}

// One edit of a file at a time in this process (read, change, replace): two would lose one of them.
const editing = new Map<string, Promise<unknown>>();

/** Reads, edits and atomically replaces a crt-list file (same mode and owner). Returns whether it changed. */
export async function editCrtListFile(path: string, edit: (text: string) => string): Promise<boolean> {
	const previous = editing.get(path) ?? Promise.resolve();
	const run = previous.catch(() => undefined).then(() => editNow(path, edit));
	editing.set(path, run);
	try {
		return await run;
	} finally {
		if (editing.get(path) === run) editing.delete(path);
	}
}

async function editNow(path: string, edit: (text: string) => string): Promise<boolean> {
	if (!isAbsolute(path)) {
		throw new CertificateeError(
			"ENDPOINT_ERROR",
			`cannot edit the crt-list file ${path}: not an absolute path`,
			{
				context: { file: path, operation: "crt-list-file" },
				hint: "name crt-list files by absolute paths in haproxy.cfg, or edit this one by hand",
			},
		);
	}
	try {
		const [text, s] = await Promise.all([readFile(path, "utf8"), stat(path)]);
		const next = edit(text);
		if (next === text) return false;
		await writeFileAtomic(path, next, { mode: s.mode & 0o7777, owner: { uid: s.uid, gid: s.gid } });
		return true;
	} catch (cause) {
		if (cause instanceof CertificateeError) throw cause;
		throw new CertificateeError(
			"ENDPOINT_ERROR",
			`cannot edit the crt-list file ${path}: ${(cause as Error).message}`,
			{ context: { file: path, operation: "crt-list-file" }, cause, retryable: true },
		);
	}
}
