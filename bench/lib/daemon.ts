/** The configuration of a bench daemon: one directory source, one haproxy-runtime target on a live HAProxy. */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "../../test/harness/haproxy.js";

/** Writes `<work>/<file>` (state in `<work>/<state>`) and returns its path. */
export async function writeDaemonConfig(
	work: string,
	source: string,
	h: { adminSocket: string; crtDir: string },
	names: { file: string; state: string } = { file: "certificatee.yaml", state: "state" },
): Promise<string> {
	const config = join(work, names.file);
	await writeFile(
		config,
		[
			`state_dir: ${join(work, names.state)}`,
			"interval: 10m",
			`listen: 127.0.0.1:${await freePort()}`,
			"sources:",
			`  - { name: files, type: directory, path: ${source}, debounce: 100ms }`,
			"targets:",
			`  - { name: lb, type: haproxy-runtime, socket: ${h.adminSocket}, crt_dir: ${h.crtDir} }`,
		].join("\n"),
	);
	return config;
}
