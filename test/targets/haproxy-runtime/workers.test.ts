/**
 * newerWorker() reads the process tree: a worker's master (its parent, the same executable) with a child
 * started after it is a reload under way. Real processes: a parent that starts two children of its own
 * executable, as `haproxy -W` does during a reload, and a real HAProxy at rest.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { afterAll, describe, expect, it } from "vitest";
import { newerWorker } from "../../../src/targets/haproxy/process-tree.js";
import { rig } from "../../harness/targets.js";

const r = rig();
const started: ChildProcess[] = [];
const pids: number[] = [];
afterAll(() => {
	for (const c of started) c.kill("SIGKILL");
	for (const pid of pids) {
		try {
			process.kill(pid, "SIGKILL");
		} catch {
			// already gone
		}
	}
});

/** A parent running `command` that starts two node children one after the other and prints their pids. */
async function family(command: string, args: string[]): Promise<{ first: number; second: number }> {
	const child = spawn(command, args, { stdio: ["ignore", "pipe", "inherit"] });
	started.push(child);
	let out = "";
	child.stdout?.on("data", (d: Buffer) => {
		out += d.toString();
	});
	while (!/^\d+ \d+$/m.test(out)) await once(child.stdout as NodeJS.ReadableStream, "data");
	const [first, second] = (/^(\d+) (\d+)$/m.exec(out) ?? []).slice(1).map(Number);
	pids.push(first as number, second as number);
	return { first: first as number, second: second as number };
}

const PARENT = `
const { spawn } = require("node:child_process");
const keep = ["-e", "setTimeout(() => {}, 60000)"];
const a = spawn(process.execPath, keep, { stdio: "ignore" });
setTimeout(() => {
	const b = spawn(process.execPath, keep, { stdio: "ignore" });
	console.log(a.pid + " " + b.pid);
}, 50);
setTimeout(() => {}, 60000);
`;

describe("newerWorker", () => {
	it("names the sibling its master started later, and nothing for the newest", async () => {
		const { first, second } = await family(process.execPath, ["-e", PARENT]);
		expect(newerWorker(first)).toBe(second);
		expect(newerWorker(second)).toBeUndefined();
	});

	it("says nothing when the parent runs another program (no master: a shell, systemd)", async () => {
		const { first, second } = await family("sh", ["-c", "sleep 60 & a=$!; sleep 60 & echo $a $!; wait"]);
		expect(newerWorker(first)).toBeUndefined();
		expect(newerWorker(second)).toBeUndefined();
		expect(newerWorker(999_999_999)).toBeUndefined();
	});

	it("a real HAProxy at rest has no newer worker; after a reload the new one has none either", async () => {
		const h = await r.haproxy({});
		const before = await h.worker();
		expect(newerWorker(before.pid)).toBeUndefined();
		const after = await h.reload();
		expect(after.pid).not.toBe(before.pid);
		expect(newerWorker(after.pid)).toBeUndefined();
	});
});
