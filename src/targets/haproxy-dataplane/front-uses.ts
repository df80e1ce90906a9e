/**
 * Where a frontend's `ssl-f-use crt X key Y` lines (HAProxy 3.2+) put a certificate's files, from the API's
 * `ssl_front_uses` (docs/haproxy-dataplane-target.md, "Keys in separate files"). Pure. HAProxy names such a
 * certificate by its crt path, and its runtime memory cannot be read through the API (the key is a separate
 * file): the configuration alone says which key file a renewal must write with it. A line without a `key`
 * (a combined PEM) is an ordinary certificate file, joined by its path; one whose crt path is relative (the
 * global crt-base applies, which certificatee does not read) is left to separate-keys.ts.
 */
import { isAbsolute } from "node:path";
import { type LoadPlacement, staleCompanions, storageRef, unquote } from "./crt-stores.js";
import type { SslFrontUse } from "./schema.js";

/** The frontends whose ssl-f-use lines HAProxy lists as the implicit crt-list `@<frontend>`. */
export function frontendsOf(crtLists: readonly string[]): string[] {
	return crtLists.filter((l) => l.startsWith("@") && !l.includes("/")).map((l) => l.slice(1));
}

function placeUse(frontend: string, use: SslFrontUse, storageDir: string): LoadPlacement | undefined {
	const certFile = unquote(use.certificate);
	if (!isAbsolute(certFile) || use.key === undefined || use.key === "") return undefined;
	const p: LoadPlacement = { runtimeName: certFile, frontend, certFile };
	const why: string[] = [];
	const cert = storageRef(certFile, storageDir);
	if ("ref" in cert) p.certRef = cert.ref;
	else why.push(cert.why);
	const keyFile = unquote(use.key);
	if (isAbsolute(keyFile)) {
		p.keyFile = keyFile;
		const key = storageRef(keyFile, storageDir);
		if ("ref" in key) p.keyRef = key.ref;
		else why.push(key.why);
	} else {
		why.push(
			`its key "${keyFile}" is relative (the global key-base applies, which certificatee does not read)`,
		);
	}
	const stale = staleCompanions(use);
	if (stale !== undefined) why.push(stale);
	if (why.length > 0) p.unwritable = why.join("; ");
	return p;
}

/** Every ssl-f-use line with a key argument and an absolute crt path, placed; frontends in name order. */
export function placeFrontUses(
	frontends: ReadonlyArray<{ frontend: string; uses: readonly SslFrontUse[] }>,
	storageDir: string,
): LoadPlacement[] {
	return [...frontends]
		.sort((a, b) => a.frontend.localeCompare(b.frontend))
		.flatMap(({ frontend, uses }) => uses.map((u) => placeUse(frontend, u, storageDir)))
		.filter((p): p is LoadPlacement => p !== undefined);
}
