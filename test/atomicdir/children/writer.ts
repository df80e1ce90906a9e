/**
 * Child process: syncs versions from..to (to = 0: forever) into a target, printing "acked <n>" after each.
 * argv: target swap(exchange|symlink|file) from to durable(0|1). "file" replaces <target>/combined.pem. Env CRASH_STEP + CRASH_NTH: SIGKILL itself at that step.
 */
import { join } from "node:path";
import { type SyncStep, syncDirectory, writeFileAtomic } from "../../../src/atomicdir/index.js";
import { combinedContent, versionedFiles } from "./versioned.js";

const [target, swap, fromArg, toArg, durableArg] = process.argv.slice(2);
const crashStep = process.env.CRASH_STEP as SyncStep | undefined;
let crashCountdown = Number(process.env.CRASH_NTH ?? "1");

function onStep(step: SyncStep): void {
	if (step !== crashStep) return;
	crashCountdown -= 1;
	if (crashCountdown === 0) process.kill(process.pid, "SIGKILL");
}

const from = Number(fromArg);
const to = Number(toArg);
process.stdout.write("ready\n");
for (let v = from; to === 0 || v <= to; v++) {
	const durable = durableArg === "1";
	const result =
		swap === "file"
			? await writeFileAtomic(
					join(target!, "combined.pem"),
					{ content: combinedContent(v), mode: 0o600 },
					{ durable },
				)
			: await syncDirectory(target!, versionedFiles(v), {
					swap: swap as "exchange" | "symlink",
					durable,
					onStep,
				});
	if (result.problems.length > 0) throw result.problems[0];
	process.stdout.write(`acked ${v}\n`);
}
process.stdout.write("done\n");
