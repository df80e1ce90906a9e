/**
 * One Data Plane API stand-in process (bench/lib/dpapi-standin.ts): argv a StandinJob JSON file. Prints
 * {"ready":true,"urls":[...]} once every node is warm; closes its servers and exits when stdin ends.
 */
import { readFileSync } from "node:fs";
import { type StandinJob, serveNodes } from "./dpapi-standin.js";

const job = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as StandinJob;
const servers = await serveNodes(job);
process.stdout.write(`${JSON.stringify({ ready: true, urls: servers.map((s) => s.url) })}\n`);
process.stdin.resume();
process.stdin.on("end", async () => {
	await Promise.all(servers.map((s) => s.close().catch(() => undefined)));
	process.exit(0);
});
