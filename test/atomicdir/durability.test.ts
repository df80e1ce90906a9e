/**
 * Durability can't be shown by kill -9 (the page cache survives it), so this test checks the order of
 * the syscalls with strace: every file and the staging directory are fsync'd before the exchange, the
 * parent after it, and the old version is removed only then.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, expect, it } from "vitest";
import { syncDirectory } from "../../src/atomicdir/index.js";
import { versionedFiles } from "./children/versioned.js";
import { childScript, heldVersion, tempDir } from "./helpers.js";

const run = promisify(execFile);
const dirs: string[] = [];
afterEach(async () => {
	for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** strace's lines with each call that another thread interrupted (`<unfinished ...>`, later `<... unlink
 * resumed>`) joined back into one line, placed where it finished: Node 22+ removes a directory's files on
 * several threads at once. */
function joinedCalls(trace: string): string[] {
	const pending = new Map<string, string>();
	const lines: string[] = [];
	for (const line of trace.split("\n")) {
		const unfinished = /^(\d+)\s+(.*) <unfinished \.\.\.>$/.exec(line);
		if (unfinished) {
			pending.set(unfinished[1]!, unfinished[2]!);
			continue;
		}
		const resumed = /^(\d+)\s+<\.\.\. \w+ resumed>(.*)$/.exec(line);
		if (resumed) {
			lines.push(`${resumed[1]} ${pending.get(resumed[1]!) ?? ""}${resumed[2]}`);
			pending.delete(resumed[1]!);
			continue;
		}
		lines.push(line);
	}
	return lines;
}

/**
 * The syscalls on paths under `base`, in order. atomicdir works relative to directory descriptors, so
 * each descriptor is mapped back to the path it was opened on (openat of a name in an open directory).
 */
function events(trace: string, base: string): string[] {
	const fds = new Map<string, string>();
	const under = (dir: string, name: string) => (dir === "AT_FDCWD" ? name : `${fds.get(dir) ?? "?"}/${name}`);
	const out: string[] = [];
	const relative = (path: string | undefined) =>
		path === base ? "<parent>" : path?.startsWith(`${base}/`) ? path.slice(base.length + 1) : undefined;
	for (const line of joinedCalls(trace)) {
		const open = /openat\((AT_FDCWD|\d+), "([^"]+)", [^)]*\) = (\d+)/.exec(line);
		if (open) {
			fds.set(open[3]!, under(open[1]!, open[2]!));
			continue;
		}
		const sync = /fsync\((\d+)\)\s+= 0$/.exec(line);
		const synced = relative(sync ? fds.get(sync[1]!) : undefined);
		if (synced !== undefined) out.push(`fsync ${synced}`);
		const unlink = /unlinkat\((AT_FDCWD|\d+), "([^"]+)", (0|AT_REMOVEDIR)\)\s+= 0$/.exec(line);
		const removed = unlink ? relative(under(unlink[1]!, unlink[2]!)) : undefined;
		if (removed !== undefined) out.push(`${unlink?.[3] === "AT_REMOVEDIR" ? "rmdir" : "unlink"} ${removed}`);
		const rename = /renameat2\((AT_FDCWD|\d+), "([^"]+)".*= 0$/.exec(line);
		const renamed = rename ? relative(under(rename[1]!, rename[2]!)) : undefined;
		if (renamed !== undefined) out.push(`renameat2 ${renamed}`);
	}
	return out.map((e) => e.replace(/atomicdir-staging-[\w-]+/, "staging"));
}

it("atomicdir/exchange fsyncs files and staging before renameat2, the parent after, then removes the old version", async () => {
	const base = tempDir();
	dirs.push(base);
	const target = join(base, "certs");
	await syncDirectory(target, versionedFiles(1));
	const trace = join(base, "trace");
	await run("strace", [
		"-f",
		"-qq",
		"-o",
		trace,
		"-e",
		"trace=openat,fsync,renameat2,unlinkat",
		process.execPath,
		await childScript("writer"),
		target,
		"exchange",
		"2",
		"2",
		"1",
	]);
	expect(heldVersion(target)).toBe(2);
	const seen = events(readFileSync(trace, "utf8"), base);
	const removal = seen.slice(6, 9).sort();
	expect([...seen.slice(0, 6), ...removal, ...seen.slice(9)]).toEqual([
		"fsync .certs.staging/tls.crt",
		"fsync .certs.staging/tls.key",
		"fsync .certs.staging/ca.crt",
		"fsync .certs.staging",
		"renameat2 .certs.staging",
		"fsync <parent>",
		"unlink .certs.staging/ca.crt",
		"unlink .certs.staging/tls.crt",
		"unlink .certs.staging/tls.key",
		"rmdir .certs.staging",
	]);
});
