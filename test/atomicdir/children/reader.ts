/**
 * Child process: reads the 3-file set in a loop until <stopFile> exists, with one reader strategy,
 * and prints {reads, mismatches, torn, retries} as JSON. argv: target tier stopFile.
 * Tiers: dirfd (files opened relative to one directory handle), identity (directory inode + birth
 * time unchanged around the reads, else retry), symlink (resolve ..data once), combined (one file, one
 * open: <target>/combined.pem), naive (each path alone).
 */
import { closeSync, constants, existsSync, openSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { join } from "node:path";
import { combinedVersions, readVersion, SET_NAMES } from "./versioned.js";

const [target, tier, stopFile] = process.argv.slice(2) as [string, string, string];
const stats = { tier, reads: 0, mismatches: 0, torn: 0, retries: 0 };

function readSet(dir: string): (number | "torn")[] {
	return SET_NAMES.map((name) => readVersion(join(dir, name), name));
}

function identity(): string {
	const st = statSync(target, { bigint: true });
	return `${st.ino}:${st.birthtimeNs}`;
}

function attempt(): (number | "torn")[] | undefined {
	try {
		switch (tier) {
			case "dirfd": {
				const fd = openSync(target, constants.O_RDONLY | constants.O_DIRECTORY);
				try {
					return readSet(`/proc/self/fd/${fd}`);
				} finally {
					closeSync(fd);
				}
			}
			case "identity": {
				const before = identity();
				const set = readSet(target);
				return identity() === before ? set : undefined;
			}
			case "combined":
				return combinedVersions(readFileSync(join(target, "combined.pem"), "utf8"));
			case "symlink":
				return readSet(join(target, readlinkSync(join(target, "..data"))));
			default:
				return readSet(target);
		}
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
		throw e;
	}
}

for (let i = 0; ; i++) {
	if (i % 64 === 0 && existsSync(stopFile)) break;
	const set = attempt();
	if (set === undefined) {
		stats.retries += 1;
		continue;
	}
	stats.reads += 1;
	if (set.includes("torn")) stats.torn += 1;
	else if (new Set(set).size !== 1) stats.mismatches += 1;
}
process.stdout.write(`${JSON.stringify(stats)}\n`);
