/**
 * The daemon: a cycle every interval (with jitter), metrics and health on `listen`, SIGHUP reloads the
 * configuration (a broken one is rejected and the old one kept), SIGTERM/SIGINT finish each endpoint's
 * in-flight write and stop.
 */
import type { EventEmitter } from "node:events";
import type { LoadedConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { describeError, isCertificateeError } from "../errors.js";
import type { Logger } from "../log.js";
import type { ClusterView } from "../metrics/cluster.js";
import type { LoopHealth } from "../metrics/health.js";
import type { Metrics } from "../metrics/index.js";
import { registerDaemonMetrics } from "../metrics/process.js";
import { type HealthServer, startHealthServer } from "../metrics/server.js";
import { type StatusDocument, statusDocument } from "../metrics/status-view.js";
import { type CycleDeps, runCycle } from "../reconcile/cycle.js";
import { cycleFailures } from "../reconcile/outcome.js";
import type { CycleReport } from "../reconcile/report.js";
import type { RenewalStatus } from "../renewal/status.js";
import { type Clock, systemClock } from "./clock.js";
import { type FailureMemory, failureLogLine, trackFailures } from "./failures.js";
import { auditLines, summarise } from "./summary.js";

/** Everything a configuration builds: the cycle's dependencies and what to close when replaced. */
export interface Engine {
	deps: CycleDeps;
	/** Called after each cycle (renewal status for metrics, ...). */
	afterCycle?(report: CycleReport): void;
	/** When a renewal falls due before the next interval (the loop wakes then). */
	nextWake?(): Date | undefined;
	/** Renewal status of every issued certificate, after the last cycle (for the status document). */
	renewals?(): RenewalStatus[];
	/** In a cluster: what this replica knows of it now (metrics, the fleet page, status.json). */
	cluster?(): ClusterView;
	/**
	 * Before a cycle: takes what operators asked for meanwhile (`renew`, `revoke` while the daemon runs); the
	 * function it returns hears how the cycle ended, to answer them.
	 */
	beginCycle?(
		signal: AbortSignal,
	): Promise<(end: { report: CycleReport } | { error: unknown }) => Promise<void>>;
	/** Starts watches that wake the loop early (a source directory changed, an operator request). */
	watch?(wake: () => void): void;
	close(): Promise<void>;
}

export interface DaemonOptions {
	loadConfig(): LoadedConfig;
	build(config: Config): Promise<Engine>;
	metrics: Metrics;
	log: Logger;
	/** Process-like emitter for SIGHUP, SIGTERM, SIGINT (process in production). */
	signals: EventEmitter;
	random?: () => number;
	/** Time and waiting between cycles (health, log reminders, renewal wake-ups); default the system clock. */
	clock?: Clock;
	/** A failure still present is logged again after this long (default 1 h). */
	remindEveryMs?: number;
	/** Called once listening, with the bound address. */
	onListening?(address: string): void;
}

/** What the loop carries from one cycle to the next; a reload replaces the configuration and the engine. */
interface Running {
	loaded: LoadedConfig;
	engine: Engine;
	health: LoopHealth;
	failures: FailureMemory;
	/** What / and /status.json show: the last cycle, as `status --json` would print it. */
	status?: StatusDocument;
	/** Cycles in a row that could not run at all. */
	failedCycles: number;
}

/** What ends a wait between cycles early: a stop (SIGTERM, SIGINT), a reload (SIGHUP), a source change. */
interface Wakes {
	/** Aborted on SIGTERM or SIGINT; in-flight writes finish, then the loop ends. */
	stop: AbortSignal;
	wakeUp(): void;
	/** Waits `ms`, or less when a wake-up came since the last wait ended (one during a cycle is not lost). */
	wait(clock: Clock, ms: number): Promise<void>;
	/** Whether SIGHUP asked for a reload since the last call. */
	takeReload(): boolean;
	detach(): void;
}

export async function runDaemon(options: DaemonOptions): Promise<void> {
	const clock = options.clock ?? systemClock;
	const random = options.random ?? Math.random;
	const { running, server } = await start(options, clock);
	const wakes = listenForWakes(options.signals, options.log);
	running.engine.watch?.(wakes.wakeUp);
	try {
		while (!wakes.stop.aborted) {
			await runOneCycle(running, wakes.stop, options, clock);
			if (wakes.stop.aborted) break;
			const delay = running.health.lastCycleError
				? retryDelay(++running.failedCycles)
				: nextDelay(running.loaded.config.interval, running.engine.nextWake?.(), clock.now(), random());
			if (!running.health.lastCycleError) running.failedCycles = 0;
			await wakes.wait(clock, delay);
			if (wakes.takeReload()) await reload(running, options, wakes.wakeUp);
		}
	} finally {
		wakes.detach();
		await running.engine.close();
		await server.close();
		options.log.info("certificatee stopped");
	}
}

/**
 * Until the next cycle: the interval with ±10 % jitter (`random` in [0, 1)), earlier when a renewal falls due
 * (1 s after it), and never less than 1 s, so a renewal that stays due cannot spin the loop.
 */
export function nextDelay(intervalMs: number, due: Date | undefined, now: number, random: number): number {
	const untilDue = due === undefined ? Number.POSITIVE_INFINITY : due.getTime() - now + 1000;
	return Math.max(1000, Math.min(intervalMs * (0.9 + 0.2 * random), untilDue));
}

/**
 * After a cycle that could not run at all (etcd unreachable, ...): 1 s, 2 s, 4 s ... up to 30 s, not the interval,
 * so the daemon is back within seconds of the cause going away.
 */
export function retryDelay(failedCycles: number): number {
	return Math.min(30_000, 1000 * 2 ** Math.max(0, failedCycles - 1));
}

/** Loads the configuration, builds its engine and starts the metrics and health server. */
async function start(options: DaemonOptions, clock: Clock) {
	const { log, metrics } = options;
	const loaded = options.loadConfig();
	const engine = await options.build(loaded.config);
	const health: LoopHealth = {
		intervalMs: loaded.config.interval,
		startedAt: clock.now(),
		configLoaded: true,
		configLoadedAt: clock.now(),
	};
	metrics.recordInterval(loaded.config.interval);
	const running: Running = { loaded, engine, health, failures: new Map(), failedCycles: 0 };
	registerDaemonMetrics(metrics.registry, () => running.health);
	// Read through `running`, so a reloaded engine's cluster is the one shown.
	metrics.recordCluster(() => running.engine.cluster?.());
	let server: HealthServer;
	try {
		server = await startHealthServer(
			loaded.config.listen,
			metrics,
			() => health,
			() => running.status,
			{ now: clock.now, token: () => running.loaded.config.listen_token },
		);
	} catch (e) {
		await engine.close();
		throw e;
	}
	options.onListening?.(server.address);
	log.info({ config: loaded.file, listen: server.address }, "certificatee started");
	return { running, server };
}

function listenForWakes(signals: EventEmitter, log: Logger): Wakes {
	const stop = new AbortController();
	let pending = new AbortController();
	let reloadRequested = false;
	const wakeUp = () => pending.abort();
	const onStop = (signal: string) => () => {
		if (stop.signal.aborted) return;
		log.info({ signal }, "stopping after in-flight writes");
		stop.abort();
		wakeUp();
	};
	const handlers: Record<string, () => void> = {
		SIGTERM: onStop("SIGTERM"),
		SIGINT: onStop("SIGINT"),
		SIGHUP: () => {
			reloadRequested = true;
			wakeUp();
		},
	};
	for (const [name, handler] of Object.entries(handlers)) signals.on(name, handler);
	return {
		stop: stop.signal,
		wakeUp,
		async wait(clock, ms) {
			await clock.sleep(ms, pending.signal);
			pending = new AbortController();
		},
		takeReload() {
			const requested = reloadRequested;
			reloadRequested = false;
			return requested;
		},
		detach() {
			for (const [name, handler] of Object.entries(handlers)) signals.off(name, handler);
		},
	};
}

/** One sync cycle; its report goes to metrics, health and the log (each failure once, when it changes). */
async function runOneCycle(running: Running, stop: AbortSignal, options: DaemonOptions, clock: Clock) {
	const { log, metrics } = options;
	running.health.cycleRunningSince = clock.now();
	let answer: ((end: { report: CycleReport } | { error: unknown }) => Promise<void>) | undefined;
	try {
		answer = await running.engine.beginCycle?.(stop);
		const report = await runCycle(running.engine.deps, "sync", stop);
		metrics.recordCycle(report);
		running.engine.afterCycle?.(report);
		running.health.last = report;
		running.health.lastCycleError = undefined;
		running.status = statusDocument(report, running.engine.renewals?.() ?? [], running.engine.cluster?.());
		const tracked = trackFailures(
			running.failures,
			cycleFailures(report),
			clock.now(),
			options.remindEveryMs,
		);
		running.failures = tracked.memory;
		for (const event of tracked.events) {
			const line = failureLogLine(event);
			log[line.level](line.fields, line.message);
		}
		for (const line of auditLines(report)) log.info(line.fields, line.message);
		// Info even when something failed: each failure has its own line, logged when it changes.
		log.info(summarise(report), "cycle finished");
		const answered = answer;
		answer = undefined;
		await answered?.({ report });
	} catch (e) {
		await answer?.({ error: e });
		running.health.lastCycleError = isCertificateeError(e)
			? `${e.code}: ${describeError(e)}`
			: describeError(e);
		log.error({ error: describeError(e) }, "cycle failed");
	} finally {
		running.health.cycleRunningSince = undefined;
		running.health.lastFinishedAt = clock.now();
	}
}

/**
 * SIGHUP: a configuration that loads and builds replaces the running one; a broken one is rejected and the old
 * one rebuilt. The old engine is closed first (it holds the state directory's lock and the issuers' pools).
 */
async function reload(running: Running, options: DaemonOptions, wakeUp: () => void): Promise<void> {
	const { log, metrics } = options;
	const now = () => (options.clock ?? systemClock).now();
	const rejected = (e: unknown) => {
		const error = isCertificateeError(e) ? `${e.code}: ${describeError(e)}` : describeError(e);
		running.health.configRejected = { at: now(), error };
		log.error({ error: describeError(e) }, "new configuration rejected; keeping the old one");
	};
	let next: LoadedConfig;
	try {
		next = options.loadConfig();
	} catch (e) {
		rejected(e);
		return;
	}
	await running.engine.close();
	try {
		running.engine = await options.build(next.config);
		if (next.config.listen !== running.loaded.config.listen) {
			log.warn(
				{ listen: next.config.listen },
				"listen changed: restart certificatee to move the metrics server",
			);
		}
		running.loaded = next;
		running.health.intervalMs = next.config.interval;
		metrics.recordInterval(next.config.interval);
		running.health.configLoadedAt = now();
		delete running.health.configRejected;
		log.info({ config: next.file }, "configuration reloaded");
	} catch (e) {
		rejected(e);
		running.engine = await options.build(running.loaded.config);
	}
	running.engine.watch?.(wakeUp);
}
