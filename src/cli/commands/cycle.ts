/** `plan`, `sync --once` and `status`: one cycle through the same runCycle, shown three ways. */
import { buildEngine } from "../../daemon/engine.js";
import { runCycle } from "../../reconcile/cycle.js";
import { failedEndpoints } from "../../reconcile/report.js";
import type { CommandContext } from "../context.js";
import { EXIT, ExitError } from "../exit.js";
import { renderPlan, renderStatus } from "../print.js";
import { styler } from "../table.js";

export async function planCommand(ctx: CommandContext): Promise<void> {
	const { config } = ctx.loadConfig();
	const engine = await buildEngine(config, { log: ctx.log, readOnly: true });
	try {
		const report = await runCycle(engine.deps, "plan", new AbortController().signal);
		const orders = engine
			.renewals()
			.filter((r) => r.decision.action === "renew-now")
			.map((r) => ({
				certificate: r.name,
				issuer: r.issuer,
				reason: r.decision.reason,
				message: r.decision.message,
			}));
		if (ctx.options.json) ctx.out(JSON.stringify({ ...report, orders }, null, 2));
		else {
			for (const o of orders) ctx.out(`order ${o.certificate} from ${o.issuer}: ${o.message}`);
			const lines = renderPlan(report, styler(process.stdout.isTTY === true));
			// Certificates not issued yet are not in the report's targets: the last line must not say "converged".
			if (orders.length > 0 && lines.at(-1) === "converged: nothing to do") {
				lines[lines.length - 1] =
					`${orders.length} order${orders.length === 1 ? "" : "s"} pending; targets are then synced`;
			}
			for (const line of lines) ctx.out(line);
		}
		const pending =
			orders.length + report.targets.flatMap((t) => t.endpoints).reduce((n, e) => n + e.steps.length, 0);
		if (failedEndpoints(report).length > 0) throw new ExitError(EXIT.error);
		if (pending > 0) throw new ExitError(EXIT.changesPending);
	} finally {
		await engine.close();
	}
}

export async function syncCommand(ctx: CommandContext): Promise<void> {
	const { config } = ctx.loadConfig();
	const engine = await buildEngine(config, { log: ctx.log, readOnly: false });
	const stop = new AbortController();
	const onSignal = () => stop.abort();
	process.once("SIGTERM", onSignal);
	process.once("SIGINT", onSignal);
	try {
		const report = await runCycle(engine.deps, "sync", stop.signal);
		engine.afterCycle?.(report);
		if (ctx.options.json) ctx.out(JSON.stringify(report, null, 2));
		else for (const line of renderPlan(report, styler(process.stdout.isTTY === true))) ctx.out(line);
		if (failedEndpoints(report).length > 0) throw new ExitError(EXIT.error);
	} finally {
		process.off("SIGTERM", onSignal);
		process.off("SIGINT", onSignal);
		await engine.close();
	}
}

export async function statusCommand(ctx: CommandContext, options: { endpoint?: string }): Promise<void> {
	const { config } = ctx.loadConfig();
	const engine = await buildEngine(config, { log: ctx.log, readOnly: true });
	try {
		const report = await runCycle(engine.deps, "plan", new AbortController().signal);
		if (ctx.options.json) {
			ctx.out(JSON.stringify({ ...report, renewals: engine.renewals() }, null, 2));
			return;
		}
		const renewals = new Map(
			engine.renewals().map((r) => [r.name, { nextRenewal: new Date(r.nextRenewalAt), issuer: r.issuer }]),
		);
		const lines = renderStatus(report, styler(process.stdout.isTTY === true), {
			now: new Date(),
			...(options.endpoint ? { endpoint: options.endpoint } : {}),
			renewals,
		});
		for (const line of lines) ctx.out(line);
	} finally {
		await engine.close();
	}
}
