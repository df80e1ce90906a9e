/**
 * Child process for the leftover test: writes one certificate file in crt_dir through the real storage code,
 * over and over, until it is killed. The content is large so that a kill lands between the temp file's
 * creation and its rename most of the time.
 *   storage-child <crt_dir> <ref> <combined PEM file>
 */
import { readFile } from "node:fs/promises";
import { writeAtomic } from "../../../src/targets/haproxy-runtime/storage.js";

const [dir, ref, pemFile] = process.argv.slice(2);
if (!dir || !ref || !pemFile) throw new Error("usage: storage-child <crt_dir> <ref> <pem file>");
const pem = await readFile(pemFile, "utf8");
// ~250 KB: the certificate (with its key) first, then comment lines HAProxy would skip.
const content = `${pem}${"# padding ".repeat(100).concat("\n").repeat(250)}`;
process.stdout.write("ready\n");
for (;;) await writeAtomic(dir, ref, content);
