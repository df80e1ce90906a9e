/**
 * The two moving parts every cluster module shares: a step that runs one at a time and retries with backoff while
 * etcd is unreachable, and a watch used only as a trigger for that step (the step always re-reads etcd, so a
 * missed, duplicated or reordered event changes nothing but latency).
 */
import type { Watcher } from "etcd3";
import type { Logger } from "../log.js";
import type { EtcdConnection } from "./etcd.js";

/** Backoff while etcd is unreachable: 0.5 s doubling to 5 s, back to 0.5 s after a success. */
export const BACKOFF_MIN_MS = 500;
export const BACKOFF_MAX_MS = 5000;

export function nextBackoff(ms: number): number {
	return Math.min(ms * 2, BACKOFF_MAX_MS);
}

/** A timer that never keeps the process alive on its own. */
export function unrefTimer(fn: () => void, ms: number): NodeJS.Timeout {
	const timer = setTimeout(fn, ms);
	timer.unref();
	return timer;
}

export interface Loop {
	/** Asks for a run now; coalesced with one already running (it runs once more after it). */
	kick(): void;
	/** No more runs; resolves when one under way has finished. */
	close(): Promise<void>;
}

/**
 * Runs `step` one at a time. A failed run goes to `onError` (never thrown) and is retried after the backoff; a
 * successful one is repeated after `everyMs`, as a safety net for a watch that missed something.
 */
export function startLoop(
	step: () => Promise<void>,
	options: { everyMs: number; onError: (e: unknown) => void },
): Loop {
	let running = false;
	let again = false;
	let closed = false;
	let backoff = BACKOFF_MIN_MS;
	let timer: NodeJS.Timeout | undefined;
	let inflight: Promise<void> | undefined;
	const schedule = (ms: number) => {
		clearTimeout(timer);
		timer = unrefTimer(kick, ms);
	};
	async function run(): Promise<void> {
		let failed = false;
		try {
			await step();
			backoff = BACKOFF_MIN_MS;
		} catch (e) {
			failed = true;
			options.onError(e);
		}
		running = false;
		if (closed) return;
		const rerun = again && !failed;
		again = false;
		if (rerun) return kick();
		if (failed) {
			schedule(backoff);
			backoff = nextBackoff(backoff);
		} else schedule(options.everyMs);
	}
	function kick(): void {
		if (closed) return;
		if (running) {
			again = true;
			return;
		}
		running = true;
		clearTimeout(timer);
		inflight = run();
	}
	return {
		kick,
		async close() {
			closed = true;
			clearTimeout(timer);
			await inflight;
		},
	};
}

/**
 * Calls `kick` on every change of `key` (or of every key under `prefix`) and on every (re)connection of the watch:
 * after a reconnect, events may have been missed. A watch that etcd cancels (e.g. its revision was compacted) is
 * created again after the backoff.
 */
export function watchKick(
	conn: EtcdConnection,
	target: { key: string } | { prefix: string },
	kick: () => void,
	log: Logger,
): { close(): Promise<void> } {
	let watcher: Watcher | undefined;
	let closed = false;
	let backoff = BACKOFF_MIN_MS;
	let timer: NodeJS.Timeout | undefined;
	const what = "key" in target ? target.key : `${target.prefix}*`;
	const create = () => {
		if (closed) return;
		const builder = conn.kv.watch();
		const w = ("key" in target ? builder.key(target.key) : builder.prefix(target.prefix)).watcher();
		watcher = w;
		w.on("connected", () => {
			backoff = BACKOFF_MIN_MS;
			kick();
		});
		w.on("put", kick);
		w.on("delete", kick);
		w.on("disconnected", (e: Error) => log.debug({ watch: what, err: e.message }, "etcd watch disconnected"));
		// The manager has already dropped a watcher it reports an error for: make a new one, never cancel this one.
		w.on("error", (e: Error) => {
			log.warn({ watch: what, err: e.message }, "etcd watch cancelled; watching again");
			if (watcher !== w) return;
			watcher = undefined;
			timer = unrefTimer(create, backoff);
			backoff = nextBackoff(backoff);
			kick();
		});
	};
	create();
	return {
		async close() {
			closed = true;
			clearTimeout(timer);
			const w = watcher;
			watcher = undefined;
			if (!w) return;
			// cancel() waits for etcd's answer, which never comes while it is unreachable.
			let wait: NodeJS.Timeout | undefined;
			await Promise.race([
				w.cancel().catch(() => undefined),
				new Promise<void>((resolve) => {
					wait = unrefTimer(resolve, conn.deadlineMs);
				}),
			]);
			clearTimeout(wait);
		},
	};
}
