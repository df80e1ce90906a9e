/**
 * Child process for the atomic-file test: replaces one file through base/atomic-file.ts over and over, each
 * version whole JSON with its own checksum, until it is killed. ~1 MB, so a kill often lands mid-write. Prints
 * `ready`, then `wrote <n>` after each version is in place.
 *   atomic-file-child <path>
 */
import { createHash } from "node:crypto";
import { writeFileAtomic } from "../../src/base/atomic-file.js";

const [path] = process.argv.slice(2);
if (!path) throw new Error("usage: atomic-file-child <path>");
process.stdout.write("ready\n");
for (let n = 1; ; n++) {
	const payload = `${n}:`.padEnd(1_000_000, "x");
	const sum = createHash("sha256").update(payload).digest("hex");
	await writeFileAtomic(path, JSON.stringify({ n, payload, sum }));
	process.stdout.write(`wrote ${n}\n`);
}
