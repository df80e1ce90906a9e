/**
 * Staging left by directory targets that are no longer configured. A configured target's own staging is
 * removed by its next sync (atomicdir, under the target's lock); a set nobody writes any more keeps its
 * staging (certificates and private keys) forever. These are reported, never deleted: certificatee cannot
 * know that no other process (an older configuration still running) writes there.
 */
import { readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { tempOwner } from "../../base/atomic-file.js";
import { setDirectory } from "./layouts.js";
import type { DirectoryTargetConfig } from "./schema.js";

// atomicdir's staging for a directory set: `.<set>.atomicdir-staging-<tag>`; a file's temp names are
// base/atomic-file.ts's (older versions wrote `.<file>.atomicdir-tmp-<tag>`: tempOwner() knows them too).
const STAGING = /^\.(.+)\.atomicdir-staging-[^/]+$/;
const stagingOwner = (name: string) => STAGING.exec(name)?.[1] ?? tempOwner(name);

/** Every path the configured directory targets write (sets and files), for these certificate names. */
function writtenPaths(
	configs: readonly DirectoryTargetConfig[],
	certificates: readonly string[],
): Set<string> {
	const paths = new Set<string>();
	for (const config of configs) {
		const names = config.certificates ?? certificates;
		for (const name of names) {
			paths.add(
				config.layout === "haproxy-pem" ? join(config.path, `${name}.pem`) : setDirectory(name, config),
			);
		}
	}
	return paths;
}

/**
 * Staging entries beside and inside the configured targets' directories whose set or file no configured
 * target writes. `certificates`: the names every target without a `certificates` list receives.
 */
export async function orphanStaging(
	configs: readonly DirectoryTargetConfig[],
	certificates: readonly string[],
): Promise<string[]> {
	const written = writtenPaths(configs, certificates);
	const dirs = new Set(configs.flatMap((c) => [c.path, dirname(c.path)]));
	const orphans: string[] = [];
	for (const dir of dirs) {
		const names = await readdir(dir).catch(() => [] as string[]);
		for (const name of names) {
			const owner = stagingOwner(name);
			if (owner !== undefined && !written.has(join(dir, owner))) orphans.push(join(dir, name));
		}
	}
	return orphans.sort();
}
