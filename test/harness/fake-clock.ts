/**
 * A Clock (src/daemon/clock.ts) whose time moves only when the test says: sleeps resolve when advance() passes
 * their end or their signal aborts. nextSleep() waits until the code under test is waiting, so a test steps the
 * daemon loop cycle by cycle, deterministically and without real waiting.
 *
 *   const clock = fakeClock(Date.parse("2026-01-01T00:00:00Z"));
 *   const ms = await clock.nextSleep();   // the loop is now waiting ms
 *   clock.advance(ms);                    // and now it runs its next cycle
 */
import type { Clock } from "../../src/daemon/clock.js";

export interface Sleep {
	/** The wait asked for. */
	ms: number;
	/** Whether it ended early (its signal aborted, before or during the wait). */
	woken: boolean;
	/** Whether it is over (time passed or woken). */
	done: boolean;
}

export interface FakeClock extends Clock {
	/** Moves time forward, ending every sleep whose end it reaches. */
	advance(ms: number): void;
	/** The next sleep the code starts (one already started and not yet handed out comes first). */
	nextSleep(): Promise<Sleep>;
	/** Every sleep so far, in order. */
	readonly sleeps: readonly Sleep[];
}

export function fakeClock(start: number): FakeClock {
	let time = start;
	const sleeps: Sleep[] = [];
	const timers: Array<{ until: number; end: () => void }> = [];
	let handedOut = 0;
	const waiting: Array<(s: Sleep) => void> = [];

	const handOut = () => {
		while (waiting.length > 0 && handedOut < sleeps.length) waiting.shift()!(sleeps[handedOut++]!);
	};

	return {
		sleeps,
		now: () => time,
		sleep(ms, signal) {
			const record: Sleep = { ms, woken: false, done: false };
			sleeps.push(record);
			const done = new Promise<void>((resolve) => {
				const end = (woken: boolean) => {
					if (record.done) return;
					record.done = true;
					record.woken = woken;
					signal.removeEventListener("abort", onAbort);
					const i = timers.indexOf(timer);
					if (i >= 0) timers.splice(i, 1);
					resolve();
				};
				const onAbort = () => end(true);
				const timer = { until: time + ms, end: () => end(false) };
				if (signal.aborted) return end(true);
				timers.push(timer);
				signal.addEventListener("abort", onAbort, { once: true });
			});
			handOut();
			return done;
		},
		advance(ms) {
			time += ms;
			for (const t of [...timers].sort((a, b) => a.until - b.until)) if (t.until <= time) t.end();
		},
		nextSleep() {
			return new Promise<Sleep>((resolve) => {
				waiting.push(resolve);
				handOut();
			});
		},
	};
}
