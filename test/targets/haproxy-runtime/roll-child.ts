/**
 * Child process for the kill-during-roll test: one sync cycle of a haproxy-runtime target (the real driver, its
 * batched storage writes and runtime sets) rolling every certificate to the PEM files of a source directory,
 * killed by the test at a random moment.
 *   roll-child <admin socket> <crt_dir> <source dir>
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseBundle } from "../../../src/certificates/bundle.js";
import type { DesiredCertificate } from "../../../src/reconcile/model.js";
import { runtimeTargetSchema } from "../../../src/targets/haproxy-runtime/schema.js";
import { buildTarget } from "../../../src/targets/registry.js";

const [socket, crtDir, sourceDir] = process.argv.slice(2);
if (!socket || !crtDir || !sourceDir) throw new Error("usage: roll-child <socket> <crt_dir> <source dir>");
const desired: DesiredCertificate[] = [];
for (const file of (await readdir(sourceDir)).sort()) {
	const name = file.replace(/\.pem$/, "");
	const combined = await readFile(join(sourceDir, file), "utf8");
	const bundle = parseBundle({ combined }, { source: file });
	desired.push({ name, names: bundle.leaf.dnsNames, bundle, origin: "roll-child" });
}
const config = runtimeTargetSchema.parse({ name: "lb1", type: "haproxy-runtime", socket, crt_dir: crtDir });
const target = buildTarget(config, { now: () => new Date() });
process.stdout.write("ready\n");
const started = performance.now();
const report = await target.run(desired, "sync", new AbortController().signal);
const e = report.endpoints[0];
process.stdout.write(`done ${e?.ok ? "ok" : "failed"} ${Math.round(performance.now() - started)} ms\n`);
await target.close();
