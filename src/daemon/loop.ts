/**
 * The daemon: a cycle every interval (with jitter), metrics and health on `listen`, SIGHUP reloads the
 * configuration (a broken one is rejected and the old one kept), SIGTERM/SIGINT finish each endpoint's
 * in-flight write and stop.
 */
import type { EventEmitter } from "node:events";
import type { LoadedConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { describeError } from "../errors.js";
import type { Logger } from "../log.js";
import type { LoopHealth } from "../metrics/health.js";
import type { Metrics } from "../metrics/index.js";
import { startHealthServer } from "../metrics/server.js";
import { type StatusDocument, statusDocument } from "../metrics/status-view.js";
import { type CycleDeps, runCycle } from "../reconcile/cycle.js";
import { type CycleReport, cycleFailures } from "../reconcile/report.js";
import type { CertificateStatus } from "../renewal/manager.js";
import { type FailureMemory, failureLogLine, trackFailures } from "./failures.js";
import { summarise } from "./summary.js";

/** Everything a configuration builds: the cycle's dependencies and what to close when replaced. */
export interface Engine {
	deps: CycleDeps;
	/** Called after each cycle (renewal status for metrics, ...). */
	afterCycle?(report: CycleReport): void;
	/** When a renewal falls due before the next interval (the loop wakes then). */
	nextWake?(): Date | undefined;
	/** Renewal status of every issued certificate, after the last cycle (for the status document). */
	renewals?(): CertificateStatus[];
	/** Starts watches that wake the loop early (a source directory changed). */
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
	/** The clock (ms since the epoch) for health and log reminders; default Date.now. */
	now?: () => number;
	/** A failure still present is logged again after this long (default 1 h). */
	remindEveryMs?: number;
	/** Called once listening, with the bound address. */
	onListening?(address: string): void;
}

export async function runDaemon(options: DaemonOptions): Promise<void> {
	const { log, metrics, signals } = options;
	const random = options.random ?? Math.random;
	const now = options.now ?? Date.now;
	let loaded = options.loadConfig();
	let engine = await options.build(loaded.config);
	const health: LoopHealth = { intervalMs: loaded.config.interval, startedAt: now(), configLoaded: true };
	let failures: FailureMemory = new Map();
	metrics.recordInterval(loaded.config.interval);
	// What / and /status.json show: the last cycle, as `status --json` would print it.
	let status: StatusDocument | undefined;
	const server = await startHealthServer(
		loaded.config.listen,
		metrics,
		() => health,
		() => status,
	);
	options.onListening?.(server.address);
	log.info({ config: loaded.file, listen: server.address }, "certificatee started");

	const stop = new AbortController();
	let reloadRequested = false;
	let wake: (() => void) | undefined;
	// A wake-up (SIGHUP, a source change) that arrives during a cycle must not wait for the next interval.
	let wakeRequested = false;
	const wakeUp = () => {
		wakeRequested = true;
		wake?.();
	};
	const onStop = (signal: string) => () => {
		if (stop.signal.aborted) return;
		log.info({ signal }, "stopping after in-flight writes");
		stop.abort();
		wakeUp();
	};
	const onTerm = onStop("SIGTERM");
	const onInt = onStop("SIGINT");
	const onHup = () => {
		reloadRequested = true;
		wakeUp();
	};
	signals.on("SIGTERM", onTerm);
	signals.on("SIGINT", onInt);
	signals.on("SIGHUP", onHup);
	engine.watch?.(wakeUp);

	try {
		while (!stop.signal.aborted) {
			health.cycleRunningSince = now();
			try {
				const report = await runCycle(engine.deps, "sync", stop.signal);
				metrics.recordCycle(report);
				engine.afterCycle?.(report);
				health.last = report;
				status = statusDocument(report, engine.renewals?.() ?? []);
				const tracked = trackFailures(failures, cycleFailures(report), now(), options.remindEveryMs);
				failures = tracked.memory;
				for (const event of tracked.events) {
					const line = failureLogLine(event);
					log[line.level](line.fields, line.message);
				}
				const s = summarise(report);
				// Info even when something failed: each failure has its own line, logged when it changes.
				log.info(s, "cycle finished");
			} catch (e) {
				log.error({ error: describeError(e) }, "cycle failed");
			} finally {
				health.cycleRunningSince = undefined;
				health.lastFinishedAt = now();
			}
			if (stop.signal.aborted) break;
			const interval = loaded.config.interval;
			const due = engine.nextWake?.();
			const untilDue = due === undefined ? Number.POSITIVE_INFINITY : due.getTime() - Date.now() + 1000;
			const delay = Math.max(1000, Math.min(interval * (0.9 + 0.2 * random()), untilDue));
			await new Promise<void>((resolve) => {
				if (wakeRequested) return resolve();
				const timer = setTimeout(resolve, delay);
				wake = () => {
					clearTimeout(timer);
					resolve();
				};
			});
			wake = undefined;
			wakeRequested = false;
			if (reloadRequested) {
				reloadRequested = false;
				let next: LoadedConfig | undefined;
				try {
					next = options.loadConfig();
				} catch (e) {
					log.error({ error: describeError(e) }, "new configuration rejected; keeping the old one");
				}
				if (next !== undefined) {
					// The old engine holds the state directory's lock: it must close before the new one opens it.
					await engine.close();
					try {
						engine = await options.build(next.config);
						if (next.config.listen !== loaded.config.listen) {
							log.warn(
								{ listen: next.config.listen },
								"listen changed: restart certificatee to move the metrics server",
							);
						}
						loaded = next;
						health.intervalMs = next.config.interval;
						metrics.recordInterval(next.config.interval);
						log.info({ config: next.file }, "configuration reloaded");
					} catch (e) {
						log.error({ error: describeError(e) }, "new configuration rejected; keeping the old one");
						engine = await options.build(loaded.config);
					}
					engine.watch?.(wakeUp);
				}
			}
		}
	} finally {
		signals.off("SIGTERM", onTerm);
		signals.off("SIGINT", onInt);
		signals.off("SIGHUP", onHup);
		await engine.close();
		await server.close();
		log.info("certificatee stopped");
	}
}
