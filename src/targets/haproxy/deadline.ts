import { z } from "zod";
import { duration } from "../../base/duration.js";

/**
 * `endpoint_deadline` of the HAProxy targets: how long one endpoint's part of a cycle (observe, writes,
 * probes) may take before it is failed for the cycle (ENDPOINT_DEADLINE), so a stuck server never holds the
 * cycle, or the targets after it, longer than this.
 */
export const endpointDeadline = duration
	.pipe(z.number().positive({ error: "endpoint_deadline must be more than 0" }))
	.prefault("5m");
