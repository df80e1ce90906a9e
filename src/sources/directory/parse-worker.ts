/** A parse-pool worker: takes candidates from the shared counter until none is left, then sends their outcomes. */
import { parentPort, workerData } from "node:worker_threads";
import type { Candidate } from "./files.js";
import { readOutcome, toWire, type Wire, type WorkerInput } from "./parse-pool.js";

const { dir, candidates, next } = workerData as WorkerInput;
const results: Array<[number, Wire]> = [];
for (let i = Atomics.add(next, 0, 1); i < candidates.length; i = Atomics.add(next, 0, 1)) {
	results.push([i, toWire(readOutcome(dir, candidates[i] as Candidate))]);
}
parentPort?.postMessage(results);
