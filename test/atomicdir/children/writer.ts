/**
 * Child process: syncs versions from..to (to = 0: forever) into a target, printing "acked <n>" after each.
 * argv: target swap(exchange|symlink|file) from to durable(0|1). "file" replaces <target>/combined.pem.
 * Env CRASH_STEP + CRASH_NTH: SIGKILL itself at that step. Env WAIT_GO=1: load everything, print
 * "ready", then wait for "go <from>" on stdin (so a test can start the next child while one runs).
 * Env ALLOW_WRITABLE_PARENT=1: write into a parent another account can write (test/atomicdir/races).
 */
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import {
	probeExchange,
	type SyncStep,
	syncDirectory,
	writeFileAtomic,
} from "../../../src/atomicdir/index.js";
import { combinedContent, versionedFiles } from "./versioned.js";

const [target, swap, fromArg, toArg, durableArg] = process.argv.slice(2) as [
	string,
	string,
	string,
	string,
	string,
];
const crashStep = process.env.CRASH_STEP as SyncStep | undefined;
let crashCountdown = Number(process.env.CRASH_NTH ?? "1");

function onStep(step: SyncStep): void {
	if (step !== crashStep) return;
	crashCountdown -= 1;
	if (crashCountdown === 0) process.kill(process.pid, "SIGKILL");
}

/**
 * Prints "acked <v>" and returns once the line is in the pipe, not queued inside this process: a test
 * that kills the writer counts only the lines it reads. On Node 24 stdout to a pipe is non-blocking, so
 * while the test does not read (a loaded machine), lines pile up in this process and a SIGKILL drops them,
 * and the target then holds many versions past the last one the test saw acknowledged.
 */
function acknowledge(v: number): Promise<void> {
	return new Promise((resolve, reject) =>
		process.stdout.write(`acked ${v}\n`, (e) => (e ? reject(e) : resolve())),
	);
}

let from = Number(fromArg);
if (process.env.WAIT_GO === "1") {
	await probeExchange(tmpdir()); // loads libc now, not inside the loop
	process.stdout.write("ready\n");
	const [line] = (await once(createInterface({ input: process.stdin }), "line")) as [string];
	from = Number(line.replace("go ", ""));
} else {
	process.stdout.write("ready\n");
}
const to = Number(toArg);
const durable = durableArg === "1";
for (let v = from; to === 0 || v <= to; v++) {
	const result =
		swap === "file"
			? await writeFileAtomic(
					join(target, "combined.pem"),
					{ content: combinedContent(v), mode: 0o600 },
					{ durable },
				)
			: await syncDirectory(target, versionedFiles(v), {
					swap: swap as "exchange" | "symlink",
					durable,
					onStep,
					allowWritableParent: process.env.ALLOW_WRITABLE_PARENT === "1",
				});
	if (result.problems.length > 0) throw result.problems[0];
	await acknowledge(v);
}
process.stdout.write("done\n");
