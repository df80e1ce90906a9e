/**
 * The daemon loop on fake time: its waits between cycles, what wakes it early (a renewal falling due, a source
 * change, SIGHUP, SIGTERM), the 1 s floor, and the lifecycle of the engines it builds and closes. The clock
 * moves only when the test advances it; no test waits for real time. The engines are plain Engine objects that
 * record what the loop does with them (the engine itself is tested with real parts in lifecycle.test.ts).
 */
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import type { LoadedConfig } from "../../src/config/load.js";
import { parseConfig } from "../../src/config/load.js";
import type { Config } from "../../src/config/schema.js";
import { type Engine, nextDelay, runDaemon } from "../../src/daemon/loop.js";
import { CertificateeError } from "../../src/errors.js";
import { createLogger } from "../../src/log.js";
import { createMetrics } from "../../src/metrics/index.js";
import type { DesiredSet } from "../../src/reconcile/model.js";
import { fakeClock } from "../harness/fake-clock.js";

const START = Date.parse("2026-03-01T00:00:00Z");
const MIN = 60_000;

function config(interval: string): LoadedConfig {
	return parseConfig(
		{ state_dir: "/nonexistent/certificatee-loop-test", interval, listen: "127.0.0.1:0" },
		`(${interval})`,
		{ env: {} },
	);
}

interface EngineBehaviour {
	/** What the n-th engine's cycle loads (default nothing); may wait on the test. */
	load?(n: number, signal: AbortSignal): Promise<DesiredSet>;
	nextWake?(n: number): Date | undefined;
	/** Builds of this config fail. */
	fails?(config: Config): boolean;
}

/** Starts runDaemon on fake time; `events` records builds, cycles and closes in the order they happen. */
function start(load: () => LoadedConfig, behaviour: EngineBehaviour = {}, random: number[] = [0.5]) {
	const clock = fakeClock(START);
	const signals = new EventEmitter();
	const events: string[] = [];
	const lines: Array<{ msg: string; level: number; code?: string }> = [];
	const log = createLogger({
		level: "info",
		destination: { write: (l: string) => lines.push(JSON.parse(l)) },
	});
	const watchers: Array<() => void> = [];
	let builds = 0;
	let draws = 0;
	const build = async (cfg: Config): Promise<Engine> => {
		const n = ++builds;
		if (behaviour.fails?.(cfg)) {
			events.push(`build ${n} failed`);
			throw new CertificateeError("CONFIG_INVALID", "this configuration cannot be built");
		}
		events.push(`build ${n} (interval ${cfg.interval / MIN} min)`);
		const nothing: DesiredSet = { certificates: [], problems: [] };
		return {
			deps: {
				loadDesired: async (signal) => (behaviour.load ? behaviour.load(n, signal) : nothing),
				targets: [],
				now: () => new Date(clock.now()),
			},
			afterCycle: () => events.push(`cycle ${n} at ${(clock.now() - START) / MIN} min`),
			nextWake: () => behaviour.nextWake?.(n),
			watch: (wake) => watchers.push(wake),
			close: async () => {
				events.push(`close ${n}`);
			},
		};
	};
	const done = runDaemon({
		loadConfig: load,
		build,
		metrics: createMetrics(),
		log,
		signals,
		clock,
		random: () => random[draws++ % random.length]!,
		remindEveryMs: 30 * MIN,
	});
	const messages = () => lines.map((l) => l.msg);
	return { clock, signals, events, messages, lines, done, sourceChanged: () => watchers.at(-1)!() };
}

/** A promise the test resolves, and one that resolves when the code under test reaches it. */
function gate() {
	let open!: () => void;
	let reached!: () => void;
	const opened = new Promise<void>((r) => {
		open = r;
	});
	const arrived = new Promise<void>((r) => {
		reached = r;
	});
	const pass = () => {
		reached();
		return opened;
	};
	return { open, arrived, pass };
}

describe("daemon/loop on fake time", () => {
	it("waits the interval with ±10 % jitter between cycles, and starts the next cycle only once it has passed", async () => {
		const d = start(() => config("10m"), {}, [0, 0.75]);
		const first = await d.clock.nextSleep();
		expect(first.ms).toBe(9 * MIN); // 0.9 × 10 min
		expect(d.events).toEqual(["build 1 (interval 10 min)", "cycle 1 at 0 min"]);
		d.clock.advance(9 * MIN - 1);
		expect(first.done).toBe(false);
		d.clock.advance(1);
		const second = await d.clock.nextSleep();
		expect(first).toMatchObject({ done: true, woken: false });
		expect(second.ms).toBe(10.5 * MIN); // 1.05 × 10 min
		expect(d.events).toEqual(["build 1 (interval 10 min)", "cycle 1 at 0 min", "cycle 1 at 9 min"]);
		d.signals.emit("SIGTERM");
		await d.done;
	});

	it("retries a cycle that could not run at all after 1, 2, 4 s (not the interval), and goes back to the interval once one runs", async () => {
		let failing = 3;
		const d = start(() => config("1h"), {
			load: async () => {
				if (failing-- > 0) throw new CertificateeError("CLUSTER_UNAVAILABLE", "etcd get failed");
				return { certificates: [], problems: [] };
			},
		});
		const sleeps: number[] = [];
		for (let i = 0; i < 4; i++) {
			const s = await d.clock.nextSleep();
			sleeps.push(s.ms);
			d.clock.advance(s.ms);
		}
		expect(sleeps.slice(0, 3)).toEqual([1000, 2000, 4000]);
		expect(sleeps[3]).toBe(60 * MIN);
		expect(d.messages().filter((m) => m === "cycle failed")).toHaveLength(3);
		d.signals.emit("SIGTERM");
		await d.done;
	});

	it("wakes 1 s after a renewal falls due before the interval, and waits at least 1 s when one is already due", async () => {
		const d = start(() => config("1h"), {
			nextWake: () => (d.clock.now() === START ? new Date(START + 5 * MIN) : new Date(START)),
		});
		expect((await d.clock.nextSleep()).ms).toBe(5 * MIN + 1000);
		d.clock.advance(5 * MIN + 1000);
		// The renewal is still due (it failed, or the CA is slow): the loop backs off 1 s, it does not spin.
		expect((await d.clock.nextSleep()).ms).toBe(1000);
		expect(nextDelay(60 * MIN, new Date(START - 10 * MIN), START, 0.5)).toBe(1000);
		expect(nextDelay(60 * MIN, undefined, START, 0.5)).toBe(60 * MIN);
		d.signals.emit("SIGTERM");
		await d.done;
	});

	it("a source change wakes the loop at once, and one that comes during a cycle ends the next wait at once", async () => {
		const during = gate();
		let cycles = 0;
		const d = start(() => config("10m"), {
			load: async () => {
				if (++cycles === 3) await during.pass();
				return { certificates: [], problems: [] };
			},
		});
		const first = await d.clock.nextSleep();
		d.sourceChanged();
		const second = await d.clock.nextSleep();
		expect(first).toMatchObject({ done: true, woken: true });
		expect(d.events.at(-1)).toBe("cycle 1 at 0 min");
		d.clock.advance(10 * MIN);
		await during.arrived; // cycle 3 is running
		d.sourceChanged();
		during.open();
		const third = await d.clock.nextSleep();
		expect(second).toMatchObject({ done: true, woken: false });
		expect(third).toMatchObject({ done: true, woken: true });
		const fourth = await d.clock.nextSleep();
		expect(fourth.done).toBe(false);
		expect(d.events).toEqual([
			"build 1 (interval 10 min)",
			"cycle 1 at 0 min",
			"cycle 1 at 0 min",
			"cycle 1 at 10 min",
			"cycle 1 at 10 min",
		]);
		d.signals.emit("SIGTERM");
		await d.done;
	});

	it("SIGHUP reloads: the old engine is closed before the new one is built, which gets the watch and its interval", async () => {
		const configs = [config("10m"), config("2m")];
		const d = start(() => configs.shift() ?? config("2m"));
		await d.clock.nextSleep();
		d.signals.emit("SIGHUP");
		const next = await d.clock.nextSleep();
		expect(next.ms).toBe(2 * MIN);
		expect(d.events).toEqual([
			"build 1 (interval 10 min)",
			"cycle 1 at 0 min",
			"close 1",
			"build 2 (interval 2 min)",
			"cycle 2 at 0 min",
		]);
		expect(d.messages()).toContain("configuration reloaded");
		d.sourceChanged(); // the watch now belongs to engine 2
		await d.clock.nextSleep();
		expect(d.events.at(-1)).toBe("cycle 2 at 0 min");
		d.signals.emit("SIGTERM");
		await d.done;
		expect(d.events.at(-1)).toBe("close 2");
		expect(d.events.filter((e) => e.startsWith("close"))).toEqual(["close 1", "close 2"]);
	});

	it("a configuration that does not load is rejected without touching the engine; one that does not build is replaced by the old one, rebuilt", async () => {
		let loads = 0;
		const d = start(
			() => {
				loads++;
				if (loads === 2) throw new CertificateeError("CONFIG_INVALID", "sources[0].path: required");
				return config(loads === 1 ? "10m" : "3m");
			},
			{ fails: (cfg) => cfg.interval === 3 * MIN },
		);
		await d.clock.nextSleep();
		d.signals.emit("SIGHUP");
		expect((await d.clock.nextSleep()).ms).toBe(10 * MIN);
		expect(d.events).toEqual(["build 1 (interval 10 min)", "cycle 1 at 0 min", "cycle 1 at 0 min"]);
		d.signals.emit("SIGHUP");
		expect((await d.clock.nextSleep()).ms).toBe(10 * MIN);
		expect(d.events.slice(3)).toEqual([
			"close 1",
			"build 2 failed",
			"build 3 (interval 10 min)",
			"cycle 3 at 0 min",
		]);
		expect(d.messages().filter((m) => m === "new configuration rejected; keeping the old one")).toHaveLength(
			2,
		);
		d.signals.emit("SIGTERM");
		await d.done;
		expect(d.events.at(-1)).toBe("close 3");
	});

	it("SIGTERM during a wait stops at once: the engine is closed and the signal handlers removed", async () => {
		const d = start(() => config("10m"));
		const wait = await d.clock.nextSleep();
		d.signals.emit("SIGTERM");
		await d.done;
		expect(wait).toMatchObject({ done: true, woken: true });
		expect(d.clock.now()).toBe(START);
		expect(d.events).toEqual(["build 1 (interval 10 min)", "cycle 1 at 0 min", "close 1"]);
		for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) expect(d.signals.listenerCount(s)).toBe(0);
		expect(d.messages().slice(-2)).toEqual(["stopping after in-flight writes", "certificatee stopped"]);
	});

	it("SIGINT during a cycle aborts the cycle's signal; the cycle finishes and no wait or cycle follows", async () => {
		const during = gate();
		let seen: AbortSignal | undefined;
		const d = start(() => config("10m"), {
			load: async (_n, signal) => {
				seen = signal;
				await during.pass();
				return { certificates: [], problems: [] };
			},
		});
		await during.arrived;
		d.signals.emit("SIGINT");
		expect(seen?.aborted).toBe(true);
		during.open();
		await d.done;
		expect(d.clock.sleeps).toHaveLength(0);
		expect(d.events).toEqual(["build 1 (interval 10 min)", "cycle 1 at 0 min", "close 1"]);
	});

	it("a failure is logged when it starts and reminded after remindEveryMs of the daemon's time, not every cycle", async () => {
		const problem = new CertificateeError("BUNDLE_NOT_PEM", "no PEM block found", {
			context: { file: "/certs/x.pem" },
		});
		const d = start(() => config("10m"), {
			load: async () => ({ certificates: [], problems: [{ subject: "/certs/x.pem", error: problem }] }),
		});
		for (let cycle = 1; cycle <= 4; cycle++) d.clock.advance((await d.clock.nextSleep()).ms);
		await d.clock.nextSleep(); // five cycles: at 0, 10, 20, 30 and 40 min
		const failing = d.lines.filter((l) => l.code === "BUNDLE_NOT_PEM").map((l) => l.msg);
		expect(failing).toEqual([
			"source failed: no PEM block found",
			"source still failing: no PEM block found",
		]);
		expect(d.events.at(-1)).toBe("cycle 1 at 40 min");
		d.signals.emit("SIGTERM");
		await d.done;
	});
});
