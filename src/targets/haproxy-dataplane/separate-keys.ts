/**
 * Certificates whose key is a separate file, seen through the Data Plane API on HAProxy 3.2+: an `ssl-f-use crt
 * X key Y` line, or `X.pem` with its `X.pem.key` companion in a crt directory. The runtime `GET` of `X` answers 500
 * (RUNTIME_SEPARATE_KEY), the storage listing skips `X` (a certificate without its key), and client-native drops
 * the `@<frontend>` crt-list's entries (HAProxy prints them with line number 0). So nothing said which names `X`
 * serves, and a renewal planned a new file: the canonical `X.pem` beside an ssl-f-use pair (which nothing loads,
 * issue 23), or a `POST` of `X.pem` answered 409 every cycle. When `X` is in storage_dir its `GET` answers anyway
 * (the certificates it holds): the ref gets that metadata, stands for HAProxy's memory with it (as an unreadable
 * crt-store pair does without a probe), and is placed where it lives with its key file untold (this target does
 * not read the frontends' `ssl_front_uses`, and never guesses a key file from a name): it is the keeper in place,
 * observed and reported `PLACEMENT_UNKNOWN`, never written, and no second file is made.
 */
import { basename, dirname } from "node:path";
import type { ObservedRef, Placement } from "../haproxy/engine/model.js";
import { withoutSlash } from "./crt-list-view.js";
import type { FetchedRuntime, FetchedStorage } from "./memory.js";

/** runtime name -> storage name of each unreadable runtime certificate whose file is in storage_dir, unlisted. */
export function separateKeyFiles(
	runtime: readonly FetchedRuntime[],
	listed: ReadonlyMap<string, FetchedStorage>,
	storageDir: string | undefined,
): Map<string, string> {
	const out = new Map<string, string>();
	if (storageDir === undefined) return out;
	for (const r of runtime) {
		if (r.unreadable === undefined || r.name.startsWith("@")) continue;
		if (dirname(r.name) !== withoutSlash(storageDir) || listed.has(basename(r.name))) continue;
		out.set(r.name, basename(r.name));
	}
	return out;
}

/**
 * The refs of those certificates, given what their files' GETs answered. A member of the crt directory is a
 * companion pair there; otherwise, beside a frontend's `@<frontend>` crt-list, an ssl-f-use line.
 */
export function placeSeparateKeys(
	refs: readonly ObservedRef[],
	files: ReadonlyMap<string, string>,
	fetched: ReadonlyMap<string, FetchedStorage>,
	crtLists: ReadonlyArray<{ list: string }>,
): ObservedRef[] {
	return refs.map((ref) => {
		const storageName = ref.runtimeName === undefined ? undefined : files.get(ref.runtimeName);
		const meta = storageName === undefined ? undefined : fetched.get(storageName)?.meta;
		if (ref.runtimeName === undefined || meta === undefined || meta.serial === undefined) return ref;
		const via: Placement["via"] =
			ref.crtLists.length > 0
				? "crt-dir"
				: crtLists.some((l) => l.list.startsWith("@"))
					? "ssl-f-use"
					: "crt";
		const line =
			via === "ssl-f-use" ? "an ssl-f-use line" : via === "crt-dir" ? "a crt directory" : "a crt line";
		return {
			...ref,
			storage: meta,
			runtime: { ...meta, status: "Used" },
			placement: {
				via,
				certFile: ref.runtimeName,
				extras: {},
				unknown: `${ref.runtimeName} (${line}) has its key in a separate file, which the Data Plane API does not name: certificatee never writes it through this target; renew it through a crt-store load or the haproxy-runtime target, or combine the key into the file`,
			},
		};
	});
}
