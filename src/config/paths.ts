/**
 * Relative paths in the configuration are resolved against the configuration file's directory, never the
 * working directory: under systemd that is `/`, so `state_dir: ./state` would become `/state`.
 * The top level's keys that name local files are listed here; each kind lists its own (`resolvePaths` in its
 * folder's kind.ts), leaving as written the keys that name files on another machine (a Data Plane API's
 * `storage_dir`, its `crt_list`) or spell a name as haproxy.cfg does (`crt_dir_name`, a runtime `crt_list`).
 */
import { isAbsolute, resolve } from "node:path";
import type { PathResolver } from "../base/kind.js";
import { resolveSourcePaths } from "../sources/kinds.js";
import { resolveTargetPaths } from "../targets/kinds.js";
import type { Config } from "./schema.js";

function abs(baseDir: string, path: string): string {
	return isAbsolute(path) ? path : resolve(baseDir, path);
}

/** A command named by a relative path (`./hooks/dns.sh`) is a file too; a bare name (`nsupdate`) is looked up in PATH. */
function command(baseDir: string, argv: string[]): string[] {
	const [first, ...rest] = argv;
	if (first === undefined || !first.includes("/")) return argv;
	return [abs(baseDir, first), ...rest];
}

/** Returns the configuration with every local path absolute (the input is not changed). */
export function resolvePaths(config: Config, baseDir: string): Config {
	const paths: PathResolver = {
		file: (path) => abs(baseDir, path),
		command: (argv) => command(baseDir, [...argv]),
	};
	return {
		...config,
		state_dir: abs(baseDir, config.state_dir),
		...(config.cluster === undefined ? {} : { cluster: clusterPaths(config.cluster, baseDir) }),
		sources: config.sources.map((s) => resolveSourcePaths(s, paths)),
		targets: config.targets.map((t) => resolveTargetPaths(t, paths)),
	};
}

function clusterPaths(
	cluster: NonNullable<Config["cluster"]>,
	baseDir: string,
): NonNullable<Config["cluster"]> {
	const { ca_file, cert_file, key_file } = cluster.etcd;
	return {
		...cluster,
		etcd: {
			...cluster.etcd,
			...(ca_file === undefined ? {} : { ca_file: abs(baseDir, ca_file) }),
			...(cert_file === undefined ? {} : { cert_file: abs(baseDir, cert_file) }),
			...(key_file === undefined ? {} : { key_file: abs(baseDir, key_file) }),
		},
		...(cluster.encryption_key_file === undefined
			? {}
			: { encryption_key_file: abs(baseDir, cluster.encryption_key_file) }),
	};
}
