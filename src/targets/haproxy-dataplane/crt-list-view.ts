/**
 * The crt-lists of a Data Plane API endpoint as certificatee sees them: which are files (with HAProxy's lines)
 * and which certificates each references, including the crt directory whose members the API hides. Pure.
 */
import { dirname } from "node:path";
import { crtListLine, isCrtDirectory } from "../haproxy/crt-list.js";
import type { ObservedCrtList } from "../haproxy/engine/model.js";
import type { FetchedRuntime } from "./memory.js";
import type { CrtListEntry } from "./schema.js";

/**
 * Which crt-lists are files, with the lines HAProxy shows for each certificate. The API names a crt-list
 * file by its path; a crt directory by the directory. None is editable here: the API's storage crt-list
 * endpoints always reload HAProxy (docs/haproxy-dataplane-target.md).
 */
export function describeCrtLists(
	lists: ReadonlyArray<{ list: string; entries: readonly CrtListEntry[] }>,
	crtDirectories: readonly string[],
): ObservedCrtList[] {
	return lists.map(({ list, entries }) => {
		if (isCrtDirectory(list, entries, crtDirectories))
			return { name: list, kind: "directory", editable: false };
		const lines: Record<string, string[]> = {};
		for (const e of entries) {
			const line = crtListLine({
				file: e.file,
				...(e.ssl_bind_config ? { options: e.ssl_bind_config } : {}),
				filters: e.sni_filter ?? [],
			});
			lines[e.file] = [...(lines[e.file] ?? []), line];
		}
		return { name: list, kind: "file", editable: false, lines };
	});
}

/** A crt-list as HAProxy names a directory may or may not end in "/". */
export const withoutSlash = (path: string) => path.replace(/\/+$/, "") || "/";

/**
 * Which crt-lists reference each runtime certificate. HAProxy lists a `crt <dir>/` directory as a crt-list
 * named by the directory, and prints its members with line number 0, which client-native's parser drops: the
 * API answers with no entries. So a list named like the storage directory holds every runtime certificate
 * directly inside that directory (except `Unused` ones, which no list or directory references), whatever
 * its entries say.
 */
export function crtListMembership(
	lists: ReadonlyArray<{ list: string; entries: ReadonlyArray<{ file: string }> }>,
	runtime: readonly FetchedRuntime[],
	storageDir?: string,
): Map<string, string[]> {
	const members = new Map<string, Set<string>>();
	const add = (file: string, list: string) => members.set(file, (members.get(file) ?? new Set()).add(list));
	for (const { list, entries } of lists) for (const e of entries) add(e.file, list);
	if (storageDir !== undefined) {
		const dir = withoutSlash(storageDir);
		for (const { list } of lists) {
			if (withoutSlash(list) !== dir) continue;
			for (const r of runtime) {
				if (dirname(r.name) === dir && r.meta.status !== "Unused") add(r.name, list);
			}
		}
	}
	return new Map([...members].map(([file, set]) => [file, [...set]]));
}
