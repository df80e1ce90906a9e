/** Test helpers for atomicdir: temp dirs, mounts (when root allows), child processes as bundled JS. */
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
	existsSync,
	mkdirSync,
	mkdtempSync,
	readdirSync,
	renameSync,
	statfsSync,
	writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { build } from "esbuild";
import { isTempName } from "../../src/base/atomic-file.js";
import { readVersion, SET_NAMES } from "./children/versioned.js";

export function tempDir(prefix = "atomicdir-"): string {
	return mkdtempSync(join(tmpdir(), prefix));
}

const TMPFS_MAGIC = 0x01021994;
/**
 * A temp dir on tmpfs (/dev/shm) when there is one: for the loops with thousands of syncs. What readers
 * and killed writers can see does not depend on the filesystem, and ext4 on the CI disk is ~5x slower
 * per directory operation.
 */
export function fastTempDir(prefix = "atomicdir-"): string {
	const shm = "/dev/shm";
	const base = existsSync(shm) && statfsSync(shm).type === TMPFS_MAGIC ? shm : tmpdir();
	return mkdtempSync(join(base, prefix));
}

/** Mounts a tmpfs at `dir` (created); false when this process may not mount (not root, no CAP_SYS_ADMIN). */
export function tryMount(args: string[], dir: string): boolean {
	mkdirSync(dir, { recursive: true });
	try {
		execFileSync("mount", [...args, dir], { stdio: "ignore" });
		return true;
	} catch {
		return false;
	}
}

export function unmount(dir: string): void {
	execFileSync("umount", ["-l", dir], { stdio: "ignore" });
}

const bundles = new Map<string, Promise<string>>();
export type ChildName = "writer" | "reader" | "attacker";
/**
 * Child scripts bundled once into plain JS (tsx would cost ~300 ms per start; node alone ~100 ms).
 * Written under node_modules/.cache so the external `koffi` resolves from the project; temp file +
 * rename, so parallel test workers never see a half-written bundle.
 */
export function childScript(name: ChildName): Promise<string> {
	let p = bundles.get(name);
	if (p === undefined) {
		p = build({
			entryPoints: [resolve("test/atomicdir/children", `${name}.ts`)],
			bundle: true,
			platform: "node",
			format: "esm",
			target: "node22",
			external: ["koffi"],
			write: false,
			logLevel: "silent",
		}).then((result) => {
			// Named by content: worktrees that share node_modules never run each other's child code.
			const contents = result.outputFiles[0]!.contents;
			const digest = createHash("sha256").update(contents).digest("hex").slice(0, 16);
			const out = resolve("node_modules/.cache/certificatee-test", `${name}-${digest}.mjs`);
			mkdirSync(dirname(out), { recursive: true });
			const tmp = `${out}.${process.pid}`;
			writeFileSync(tmp, contents);
			renameSync(tmp, out);
			return out;
		});
		bundles.set(name, p);
	}
	return p;
}

export interface Child {
	pid: number;
	lines: string[];
	exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
	kill(signal?: NodeJS.Signals): void;
	/** Writes one line to the child's stdin. */
	send(line: string): void;
	/** Resolves when a stdout line satisfies `match`. */
	waitFor(match: (line: string) => boolean): Promise<void>;
}

export async function startChild(
	name: ChildName,
	args: string[],
	env: Record<string, string> = {},
	as: { uid: number; gid: number } | undefined = undefined,
): Promise<Child> {
	const script = await childScript(name);
	const proc = spawn(process.execPath, [script, ...args], {
		env: { ...process.env, ...env },
		stdio: ["pipe", "pipe", "pipe"],
		...as,
	});
	const lines: string[] = [];
	const waiters: { match: (l: string) => boolean; resolve: () => void }[] = [];
	let buffer = "";
	let stderr = "";
	proc.stdout.setEncoding("utf8");
	proc.stdout.on("data", (chunk: string) => {
		buffer += chunk;
		const parts = buffer.split("\n");
		buffer = parts.pop() ?? "";
		for (const line of parts) {
			lines.push(line);
			for (const w of waiters.filter((x) => x.match(line))) {
				waiters.splice(waiters.indexOf(w), 1);
				w.resolve();
			}
		}
	});
	proc.stderr.on("data", (chunk: Buffer) => {
		stderr += chunk.toString();
	});
	proc.stdin.on("error", () => {}); // a killed child closes its end
	const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((res) =>
		proc.on("close", (code, signal) => res({ code, signal, stderr })),
	);
	return {
		pid: proc.pid ?? 0,
		lines,
		exited,
		kill: (signal = "SIGKILL") => proc.kill(signal),
		send: (line) => proc.stdin.write(`${line}\n`),
		waitFor: (match) =>
			lines.some(match)
				? Promise.resolve()
				: new Promise<void>((res, rej) => {
						waiters.push({ match, resolve: res });
						exited.then((x) => rej(new Error(`child exited (${x.code ?? x.signal}): ${x.stderr}`)));
					}),
	};
}

/**
 * The one version a target holds, checked: exactly the 3 files of the set (plus the symlink layout's
 * own entries), each complete, all of the same version. Throws with what is wrong otherwise.
 */
export function heldVersion(target: string): number {
	const names = readdirSync(target).filter((n) => !n.startsWith(".."));
	if (names.sort().join(",") !== [...SET_NAMES].sort().join(",")) {
		throw new Error(`file set is ${names.join(",")}`);
	}
	const versions = SET_NAMES.map((n) => readVersion(join(target, n), n));
	if (versions.includes("torn")) throw new Error(`torn file: ${versions.join(",")}`);
	if (new Set(versions).size !== 1) throw new Error(`mixed versions: ${versions.join(",")}`);
	return versions[0] as number;
}

export function stagingLeftovers(parent: string): string[] {
	return readdirSync(parent).filter((n) => n.includes("atomicdir-staging") || isTempName(n));
}

/** Version directories inside a symlink-layout target (`..<stamp>.<random>`, not `..data`). */
export function versionDirs(target: string): string[] {
	return readdirSync(target).filter((n) => n.startsWith("..") && n !== "..data");
}

/** What a reader child reports when it stops (test/atomicdir/children/reader). */
export interface ReaderStats {
	tier: string;
	reads: number;
	mismatches: number;
	torn: number;
	retries: number;
}
