/**
 * Reading and parsing many candidates at once (a first load, `certificatee validate`): parsing is synchronous
 * CPU (X.509 decoding in OpenSSL, about 0.3 ms a file), so with more than a few hundred files a worker thread
 * per spare core parses beside the main thread. All of them take the next candidate from one shared counter, so
 * the work stays balanced whatever the machine's load. Workers live for one batch only.
 *
 * A worker runs the built module (parse-worker.js); when it is absent (the sources run by a TypeScript runner)
 * everything is parsed on the main thread, with the same results.
 */
import { existsSync } from "node:fs";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { type Bundle, Secret } from "../../certificates/index.js";
import { CertificateeError, type ErrorCode, type ErrorContext } from "../../errors.js";
import type { Candidate } from "./files.js";
import { type Parsed, readAndParse } from "./parsed-cache.js";

/** A candidate's outcome: its parse, or the error that kept its files from being read. */
export type ReadOutcome = Parsed | { ok: false; unreadable: unknown };

/** Below this many candidates a worker costs more to start (~50 ms) than it saves. */
export const WORKER_THRESHOLD = 400;

/** How often the main thread lets the event loop run while it parses (health checks, signals). */
const YIELD_EVERY_MS = 50;

export interface ParseAllOptions {
	signal: AbortSignal;
	/** Worker threads to start; default one per core beyond the first when there are WORKER_THRESHOLD or more. */
	workers?: number;
}

/** The outcomes in the candidates' order, and how many of them worker threads produced. */
export async function parseAll(
	dir: string,
	candidates: readonly Candidate[],
	options: ParseAllOptions,
): Promise<{ outcomes: ReadOutcome[]; byWorkers: number }> {
	const workers = Math.min(options.workers ?? defaultWorkers(candidates.length), candidates.length);
	const next = new Int32Array(new SharedArrayBuffer(4));
	const out: ReadOutcome[] = new Array(candidates.length);
	const helpers =
		workers > 0 && existsSync(fileURLToPath(WORKER_ENTRY))
			? startWorkers(workers, dir, candidates, next)
			: [];
	try {
		let slice = performance.now();
		for (let i = Atomics.add(next, 0, 1); i < candidates.length; i = Atomics.add(next, 0, 1)) {
			options.signal.throwIfAborted();
			out[i] = readOutcome(dir, candidates[i] as Candidate);
			if (performance.now() - slice > YIELD_EVERY_MS) {
				await new Promise((r) => setImmediate(r));
				slice = performance.now();
			}
		}
		let byWorkers = 0;
		for (const settled of await Promise.allSettled(helpers.map((h) => h.done))) {
			if (settled.status !== "fulfilled") continue;
			for (const [i, wire] of settled.value) out[i] = fromWire(wire);
			byWorkers += settled.value.length;
		}
		// A worker that died took its candidates with it: they are parsed here.
		for (const [i, c] of candidates.entries()) out[i] ??= readOutcome(dir, c);
		return { outcomes: out, byWorkers };
	} finally {
		for (const h of helpers) void h.worker.terminate();
	}
}

function defaultWorkers(count: number): number {
	return count >= WORKER_THRESHOLD ? Math.min(3, availableParallelism() - 1) : 0;
}

/** One candidate, on whichever thread takes it. */
export function readOutcome(dir: string, c: Candidate): ReadOutcome {
	try {
		return readAndParse(dir, c);
	} catch (e) {
		return { ok: false, unreadable: e };
	}
}

// --- between threads: a Secret and a CertificateeError do not survive structured cloning, so they travel as data.

export type Wire =
	| { ok: true; bundle: Omit<Bundle, "key"> & { key: string } }
	| { ok: false; error: { code: ErrorCode; message: string; hint?: string; context: ErrorContext } }
	| { ok: false; unreadable: string };

export function toWire(o: ReadOutcome): Wire {
	if (o.ok) return { ok: true, bundle: { ...o.bundle, key: o.bundle.key.reveal() } };
	if ("unreadable" in o)
		return {
			ok: false,
			unreadable: o.unreadable instanceof Error ? o.unreadable.message : String(o.unreadable),
		};
	const { code, message, hint, context } = o.error;
	return { ok: false, error: { code, message, context, ...(hint === undefined ? {} : { hint }) } };
}

export function fromWire(w: Wire): ReadOutcome {
	if (w.ok) return { ok: true, bundle: { ...w.bundle, key: new Secret(w.bundle.key) } };
	if ("unreadable" in w) return { ok: false, unreadable: new Error(w.unreadable) };
	const { code, message, hint, context } = w.error;
	return {
		ok: false,
		error: new CertificateeError(code, message, { context, ...(hint === undefined ? {} : { hint }) }),
	};
}

/** What the main thread sends a worker. */
export interface WorkerInput {
	dir: string;
	candidates: readonly Candidate[];
	next: Int32Array;
}

const WORKER_ENTRY = new URL("./parse-worker.js", import.meta.url);

function startWorkers(count: number, dir: string, candidates: readonly Candidate[], next: Int32Array) {
	return Array.from({ length: count }, () => {
		const worker = new Worker(WORKER_ENTRY, { workerData: { dir, candidates, next } satisfies WorkerInput });
		const done = new Promise<Array<[number, Wire]>>((resolve, reject) => {
			worker.once("message", resolve);
			worker.once("error", reject);
			worker.once("exit", (code) => reject(new Error(`parse worker exited with code ${code}`)));
		});
		// Settled by the caller; an early exit must not be an unhandled rejection meanwhile.
		done.catch(() => undefined);
		return { worker, done };
	});
}
