/**
 * Deadlines scaled to the machine: a wait that is generous on an idle 2-core box is short on one running the
 * suite beside a CPU hog (a daemon took 6 s from spawn to its first log line at a load of 26). A harness wait's
 * default is stretched by how oversubscribed the machine is now (1-minute load per CPU), from 1x to 3x.
 *
 *   await daemon.waitForLog(/cycle finished/);   // the default: scaled(20_000)
 */
import { availableParallelism, loadavg } from "node:os";

const MAX_FACTOR = 3;

export function scaled(ms: number): number {
	const perCpu = (loadavg()[0] ?? 0) / availableParallelism();
	return Math.round(ms * Math.min(MAX_FACTOR, Math.max(1, perCpu)));
}
