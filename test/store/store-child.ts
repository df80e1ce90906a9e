/**
 * Child process for the store tests.
 *   write <dir>: opens the store and writes large values in a loop until killed (prints "ready" first).
 *   open <dir>:  tries to open the store; prints the error code and message and exits 3 when refused.
 *   put-big <dir>: writes a 64 KiB value over "renewal/web" (read first); prints the error as JSON when refused.
 */
import { createHash } from "node:crypto";
import { isCertificateeError } from "../../src/errors.js";
import { openFileStore } from "../../src/store/file-store.js";

const [mode, dir] = process.argv.slice(2);
if (!dir) throw new Error("usage: store-child write|open <dir>");

if (mode === "put-big") {
	const store = await openFileStore(dir);
	const version = (await store.get("renewal/web"))?.version ?? 0;
	try {
		await store.put("renewal/web", { padding: "x".repeat(65_536) }, version);
		process.stdout.write("written\n");
	} catch (e) {
		process.stdout.write(
			`${JSON.stringify(isCertificateeError(e) ? { ...e.toJSON() } : { raw: String(e) })}\n`,
		);
	}
	store.close();
} else if (mode === "open") {
	try {
		const store = await openFileStore(dir);
		process.stdout.write("opened\n");
		store.close();
	} catch (e) {
		if (isCertificateeError(e)) {
			process.stdout.write(`${e.code} ${e.message}\n`);
			process.exit(3);
		}
		throw e;
	}
} else {
	const store = await openFileStore(dir);
	const versions = new Map<string, number>();
	for (const key of await store.list("")) versions.set(key, (await store.get(key))?.version ?? 0);
	process.stdout.write("ready\n");
	for (let i = 0; ; i++) {
		const key = `round/item-${i % 4}`;
		// ~256 KB so a kill lands inside a write often enough.
		const payload = `${i}:`.padEnd(256 * 1024, String.fromCharCode(97 + (i % 26)));
		const sum = createHash("sha256").update(payload).digest("hex");
		const version = await store.put(key, { payload, sum }, versions.get(key) ?? 0);
		versions.set(key, version);
	}
}
