/**
 * Child process: syncs versions from..to (to = 0: forever) into a target, printing "acked <n>" after each.
 * argv: target swap from to durable(0|1). Env CRASH_STEP + CRASH_NTH: SIGKILL itself at that step.
 */
import { type SyncStep, syncDirectory } from "../../../src/atomicdir/index.js";
import { versionedFiles } from "./versioned.js";

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
	const result = await syncDirectory(target!, versionedFiles(v), {
		swap: swap as "exchange" | "symlink",
		durable: durableArg === "1",
		onStep,
	});
	if (result.problems.length > 0) throw result.problems[0];
	process.stdout.write(`acked ${v}\n`);
}
process.stdout.write("done\n");
