/**
 * Certificates whose key is a separate file that the Data Plane API does not name: `X.pem` with its `X.pem.key`
 * companion in a crt directory (HAProxy's `ssl-load-extra-files`, any version), or an `ssl-f-use crt X key Y`
 * line the API's ssl_front_uses cannot place (a relative crt path; front-uses.ts places the others). The storage
 * listing skips `X` (a certificate without its key); on 3.2+ the runtime `GET` of `X` answers 500
 * (RUNTIME_SEPARATE_KEY), before 3.2 it answers like any other. So nothing said that `X` has a key elsewhere,
 * and a renewal planned a new file: the canonical `X.pem` beside an ssl-f-use pair (which nothing loads), or a
 * `POST` of `X.pem` answered 409 every cycle (2.6-3.0). When `X` is in storage_dir its `GET` answers anyway: a
 * file the listing skips while HAProxy loads it holds no key the API accepts, so HAProxy took its key from
 * elsewhere. The ref gets that metadata and is the keeper in place, never written, with what to do:
 * - the companion `X.pem.key` cannot be written or removed through the API: its storage name is sanitised to
 *   `X_pem.key` (client-native misc.SanitizeFilename keeps only the last extension), which addresses another
 *   file or none; writing a combined `X.pem` alone would leave `X.pem.key` holding the old key;
 * - an ssl-f-use line whose files certificatee cannot tell is left as it is.
 */
import { basename, dirname } from "node:path";
import type { ObservedRef, Placement } from "../haproxy/engine/model.js";
import { sanitizeStorageName } from "../haproxy/naming.js";
import { withoutSlash } from "./crt-list-view.js";
import type { FetchedRuntime, FetchedStorage } from "./memory.js";

/** runtime name -> storage name of each runtime certificate whose file is in storage_dir, unlisted. */
export function separateKeyFiles(
	runtime: readonly FetchedRuntime[],
	listed: ReadonlyMap<string, FetchedStorage>,
	storageDir: string | undefined,
): Map<string, string> {
	const out = new Map<string, string>();
	if (storageDir === undefined) return out;
	for (const r of runtime) {
		if (r.name.startsWith("@") || r.meta.status === "Unused") continue;
		if (dirname(r.name) !== withoutSlash(storageDir) || listed.has(basename(r.name))) continue;
		out.set(r.name, basename(r.name));
	}
	return out;
}

/** Why such a ref is never written, and what the operator does instead. */
function refusal(runtimeName: string, via: Placement["via"]): string {
	if (via === "crt-dir") {
		const file = basename(runtimeName);
		const key = `${file}.key`;
		const stem = `${file.replace(/\.[^.]*$/, "")}.key`;
		return `${runtimeName} (a crt directory) has its key in a separate file (${key} by HAProxy's ssl-load-extra-files, or ${stem} with ssl-load-extra-del-ext), which the Data Plane API does not name and cannot write or remove (it addresses ${key} as ${sanitizeStorageName(key)}): certificatee never writes it through this target. Combine the key into ${file} and delete its key file (then the target renews it in place), or renew it through the haproxy-runtime target`;
	}
	const line = via === "ssl-f-use" ? "an ssl-f-use line" : "a crt line";
	return `${runtimeName} (${line}) has its key in a separate file, which the Data Plane API does not name: certificatee never writes it through this target; give the line an absolute crt and key path in storage_dir (then the target renews the pair in place), renew it through the haproxy-runtime target, or combine the key into the file`;
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
		return {
			...ref,
			storage: meta,
			// Before 3.2 HAProxy's memory reads like any other; from 3.2 the file stands for it.
			runtime: ref.runtime?.serial !== undefined ? ref.runtime : { ...meta, status: "Used" },
			placement: { via, certFile: ref.runtimeName, extras: {}, unknown: refusal(ref.runtimeName, via) },
		};
	});
}
