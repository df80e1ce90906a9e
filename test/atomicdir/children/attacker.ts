/**
 * Child process, run as another account that can write a target's parent: races a root writer by
 * swapping names for symlinks to a directory it must never touch (issue 25, finding 1).
 * argv: mode parent victim target-name. Modes:
 * - staging: every new staging directory is renamed away and replaced by a symlink to the victim;
 * - target: the target is swapped for a symlink to the victim and back, over and over.
 * Prints "ready", runs until "stop" on stdin, then prints "swaps <n>" and exits.
 */
import { lstatSync, readdirSync, renameSync, symlinkSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

const [mode, parent, victim, name] = process.argv.slice(2) as [string, string, string, string];
let stopping = false;
createInterface({ input: process.stdin }).on("line", (line) => {
	if (line === "stop") stopping = true;
});

let swaps = 0;
let moved = 0;
const yieldNow = () => new Promise((r) => setImmediate(r));
/** Busy for `us` microseconds: a timer is far longer than the writer's window. */
function spin(us: number): void {
	const until = process.hrtime.bigint() + BigInt(us) * 1000n;
	while (process.hrtime.bigint() < until) {
		// hold the state a moment
	}
}

function swapStaging(): void {
	for (const entry of readdirSync(parent)) {
		if (!entry.includes("atomicdir-staging-") || entry.includes(".moved")) continue;
		try {
			renameSync(join(parent, entry), join(parent, `${entry}.moved-${moved++}`));
			symlinkSync(victim, join(parent, entry));
			swaps++;
		} catch {
			// the writer renamed or removed it first: the next one
		}
	}
}

function swapTarget(): void {
	const target = join(parent, name);
	const away = join(parent, `.${name}.moved-${moved++}`);
	try {
		// A link of its own left behind when the writer got in between: start again from no target.
		if (lstatSync(target, { throwIfNoEntry: false })?.isSymbolicLink()) unlinkSync(target);
		renameSync(target, away);
		symlinkSync(victim, target);
		swaps++;
		spin(200);
		unlinkSync(target);
		renameSync(away, target);
	} catch {
		// the writer made a new target meanwhile (it saw none): keep racing with whatever is there
	}
}

process.stdout.write("ready\n");
for (let i = 0; !stopping; i++) {
	if (mode === "staging") swapStaging();
	else {
		swapTarget();
		// The real target stays in place a random while, so the writer's calls land on either state.
		spin(Math.floor(Math.random() * 2000));
	}
	if (i % 64 === 0) await yieldNow();
}
process.stdout.write(`swaps ${swaps}\n`);
process.exit(0);
