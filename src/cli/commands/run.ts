/** `certificatee run`: the daemon. */
import { buildEngine } from "../../daemon/engine.js";
import { runDaemon } from "../../daemon/loop.js";
import { createMetrics } from "../../metrics/index.js";
import type { CommandContext } from "../context.js";

export async function runCommand(ctx: CommandContext): Promise<void> {
	const metrics = createMetrics();
	await runDaemon({
		loadConfig: () => ctx.loadConfig(),
		build: (config) =>
			buildEngine(config, {
				log: ctx.log,
				readOnly: false,
				metrics,
				prepareIssuers: true,
				serveRequests: true,
			}),
		metrics,
		log: ctx.log,
		signals: process,
	});
}
