/**
 * Time as the daemon loop sees it: what time it is, and a wait that a wake-up or a stop cuts short. Passed in,
 * so the loop's waits, wake-ups and floors are tested with fake time (test/harness/fake-clock.ts).
 */

export interface Clock {
	/** Milliseconds since the epoch. */
	now(): number;
	/** Resolves after `ms`, or as soon as `signal` aborts; never rejects. */
	sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
	now: () => Date.now(),
	sleep: (ms, signal) =>
		new Promise<void>((resolve) => {
			if (signal.aborted) return resolve();
			const done = () => {
				clearTimeout(timer);
				signal.removeEventListener("abort", done);
				resolve();
			};
			const timer = setTimeout(done, ms);
			signal.addEventListener("abort", done, { once: true });
		}),
};
