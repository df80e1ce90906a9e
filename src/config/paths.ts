/**
 * Relative paths in the configuration are resolved against the configuration file's directory, never the
 * working directory: under systemd that is `/`, so `state_dir: ./state` would become `/state`.
 * The list of keys that name local files lives here, once; keys that name files on another machine (a
 * Data Plane API's `storage_dir`, its `crt_list`) or spell a name as haproxy.cfg does (`crt_dir_name`,
 * a runtime target's `crt_list`) are left as written.
 */
import { isAbsolute, resolve } from "node:path";
import { parseAddress } from "../base/address.js";
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
	return {
		...config,
		state_dir: abs(baseDir, config.state_dir),
		...(config.cluster === undefined ? {} : { cluster: clusterPaths(config.cluster, baseDir) }),
		sources: config.sources.map((s) => {
			switch (s.type) {
				case "directory":
					return { ...s, path: abs(baseDir, s.path) };
				case "acme":
					return {
						...s,
						...(s.ca_file === undefined ? {} : { ca_file: abs(baseDir, s.ca_file) }),
						...(s.dns_hook === undefined ? {} : { dns_hook: command(baseDir, s.dns_hook) }),
						...(s.dns01 === undefined
							? {}
							: {
									dns01: {
										rfc2136: {
											...s.dns01.rfc2136,
											tsig_secret_file: abs(baseDir, s.dns01.rfc2136.tsig_secret_file),
										},
									},
								}),
					};
				default:
					return s;
			}
		}),
		targets: config.targets.map((t) => {
			switch (t.type) {
				case "haproxy-runtime": {
					const address = parseAddress(t.socket);
					const unix = t.socket.startsWith("unix@");
					const socket = "path" in address ? `${unix ? "unix@" : ""}${abs(baseDir, address.path)}` : t.socket;
					// HAProxy names certificates by crt_dir as haproxy.cfg spells it: keep that spelling.
					return {
						...t,
						socket,
						crt_dir: abs(baseDir, t.crt_dir),
						crt_dir_name: t.crt_dir_name ?? t.crt_dir,
					};
				}
				case "haproxy-dataplane":
					return {
						...t,
						endpoints: t.endpoints.map((e) =>
							e.ca_file === undefined ? e : { ...e, ca_file: abs(baseDir, e.ca_file) },
						),
					};
				case "directory":
					return t.on_change === undefined
						? t
						: { ...t, on_change: { ...t.on_change, command: command(baseDir, t.on_change.command) } };
				default:
					return t;
			}
		}),
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
