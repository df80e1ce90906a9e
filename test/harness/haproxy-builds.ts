/**
 * The HAProxy versions of the matrix a layout test runs on: the builds in `../shared/haproxy/<version>/haproxy`
 * (see its README) that exist on this machine, plus HAPROXY_BIN when it is one of the asked-for versions.
 * `HAPROXY_BUILDS` names another directory of builds.
 *
 *   for (const b of haproxyBuilds(["3.2", "3.4"])) describe(`HAProxy ${b.version}`, () => { ... b.bin ... });
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { HAPROXY_BIN, HAPROXY_VERSION } from "./haproxy.js";
import { matrixDir } from "./matrix.js";

export interface HaproxyBuild {
	/** "3.4.0", as `haproxy -v` says. */
	version: string;
	bin: string;
}

const SHARED_VERSIONS = ["2.8.0", "3.0.0", "3.2.0", "3.4.0"];

/** HAPROXY_BUILDS, else the matrix's own lookup: `shared/haproxy` beside the clone or one of its parents. */
function buildsDir(): string | undefined {
	if (process.env.HAPROXY_BUILDS) return process.env.HAPROXY_BUILDS;
	try {
		return matrixDir(process.cwd());
	} catch {
		return undefined;
	}
}

/** `haproxy -v` of a binary: "2.6.12", or undefined when it does not run. */
export function versionOf(bin: string): string | undefined {
	try {
		const out = execFileSync(bin, ["-v"], { encoding: "utf8", timeout: 10_000 });
		return /version (\d+\.\d+\.\d+)/.exec(out)?.[1];
	} catch {
		return undefined;
	}
}

/** The builds of these lines ("3.2", "3.4") available here, oldest first; HAPROXY_BIN counts when it is one. */
export function haproxyBuilds(lines: readonly string[]): HaproxyBuild[] {
	const wanted = (v: string) => lines.some((l) => v === l || v.startsWith(`${l}.`));
	const found = new Map<string, HaproxyBuild>();
	const dir = buildsDir();
	for (const version of SHARED_VERSIONS) {
		const bin = dir === undefined ? undefined : join(dir, version, "haproxy");
		if (bin !== undefined && wanted(version) && existsSync(bin)) found.set(version, { version, bin });
	}
	const own = versionOf(HAPROXY_BIN);
	if (own !== undefined && wanted(own) && !found.has(own)) found.set(own, { version: own, bin: HAPROXY_BIN });
	return [...found.values()].sort((a, b) => a.version.localeCompare(b.version, "en", { numeric: true }));
}

/**
 * HAPROXY_BIN and the builds of these lines: for a case that holds on every version, so it runs on the suite's
 * own HAProxy (Debian's 2.6) and on the LTS lines too, in the files the matrix leaves out. HAPROXY_BIN first.
 */
export function haproxyBinAndBuilds(lines: readonly string[]): HaproxyBuild[] {
	const own: HaproxyBuild = { version: HAPROXY_VERSION, bin: HAPROXY_BIN };
	return [own, ...haproxyBuilds(lines).filter((b) => b.version !== own.version)];
}
