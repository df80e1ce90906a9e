/**
 * Runtime crt-lists through the API (`/services/haproxy/runtime/ssl_crt_lists`); crt directories are listed
 * as crt-lists named without trailing slash. Writes answer with an empty body.
 */
import type { ApiCalls } from "./calls.js";
import { type CrtListEntry, crtListEntriesSchema, crtListsSchema } from "./schema.js";

export interface NewCrtListEntry {
	file: string;
	ssl_bind_config?: string;
	sni_filter?: string[];
}

/** Runtime crt-lists (crt directories are listed as crt-lists named without trailing slash). */
export interface CrtListApi {
	lists(signal: AbortSignal): Promise<string[]>;
	entries(list: string, signal: AbortSignal): Promise<CrtListEntry[]>;
	add(list: string, entry: NewCrtListEntry, signal: AbortSignal): Promise<void>;
	delete(list: string, certFile: string, lineNumber: number | undefined, signal: AbortSignal): Promise<void>;
}

const CRT_LISTS = "/services/haproxy/runtime/ssl_crt_lists";

const listQuery = (list: string) => `name=${encodeURIComponent(list)}`;

export function createCrtListApi({ read, writeEmpty }: ApiCalls): CrtListApi {
	return {
		lists: async (signal) =>
			(await read("getAllCrtLists", CRT_LISTS, crtListsSchema, signal)).map((l) => l.file),
		entries: (list, signal) =>
			read("getAllCrtListEntries", `${CRT_LISTS}/entries?${listQuery(list)}`, crtListEntriesSchema, signal),
		add: (list, entry, signal) =>
			writeEmpty(
				{
					operation: "addCrtListEntry",
					method: "POST",
					path: `${CRT_LISTS}/entries?${listQuery(list)}`,
					body: { contentType: "application/json", data: JSON.stringify(entry) },
				},
				signal,
			),
		delete: (list, certFile, lineNumber, signal) => {
			const line = lineNumber === undefined ? "" : `&line_number=${lineNumber}`;
			return writeEmpty(
				{
					operation: "deleteCrtListEntry",
					method: "DELETE",
					path: `${CRT_LISTS}/entries?${listQuery(list)}&cert_file=${encodeURIComponent(certFile)}${line}`,
				},
				signal,
			);
		},
	};
}
