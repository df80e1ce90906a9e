/**
 * Child process for the pair-kill test, on the built code (dist/: `npm run build`), so a round costs a plain
 * node start: renews one certificate/key pair through the real placed-write code, alternating between two
 * bundles (each with its own key), until it is killed. Prints `ready`, then `wrote <n>` after each pair is in place.
 *   pair-child.mjs <journal dir> <cert file> <key file> <argument|companion> <combined PEM A> <combined PEM B>
 */
import { readFile } from "node:fs/promises";
import { parseBundle } from "../../../dist/certificates/index.js";
import { placedWrite } from "../../../dist/targets/haproxy/engine/placement.js";
import { writePlaced } from "../../../dist/targets/haproxy-runtime/pair.js";

const [journalDir, certFile, keyFile, by, a, b] = process.argv.slice(2);
const bundles = await Promise.all(
	[a, b].map(async (f) => parseBundle({ combined: await readFile(f, "utf8") }, { source: f })),
);
const via = by === "argument" ? "crt-store" : "crt-dir";
const write = placedWrite({ via, certFile, key: { file: keyFile, by }, extras: {} });
if ("refused" in write) throw new Error(write.refused);
process.stdout.write("ready\n");
for (let i = 0; ; i++) {
	await writePlaced(write, bundles[i % 2], journalDir);
	process.stdout.write(`wrote ${i + 1}\n`);
}
