/** `plan`, `sync --once` and `status`: one cycle through the same runCycle, shown three ways. */
import { buildEngine } from "../../daemon/engine.js";
import { auditLines } from "../../daemon/summary.js";
import { CertificateeError } from "../../errors.js";
import { statusDocument } from "../../metrics/status-view.js";
import { runCycle } from "../../reconcile/cycle.js";
import { cycleOutcome } from "../../reconcile/outcome.js";
import { targetEndpoints } from "../../targets/kinds.js";
import type { CommandContext } from "../context.js";
import { cycleExitCode, EXIT, ExitError } from "../exit.js";
import { renderCluster, renderPlan } from "../print.js";
import { renderStatus } from "../print-status.js";
import { createProgress } from "../progress.js";
import { styler } from "../table.js";

export async function planCommand(ctx: CommandContext): Promise<void> {
	const { config } = ctx.loadConfig();
	const engine = await buildEngine(config, { log: ctx.log, readOnly: true });
	try {
		const report = await runCycle(engine.deps, "plan", new AbortController().signal);
		const orders = (report.renewals ?? [])
			.filter((r) => r.state === "due" || r.state === "failing")
			.map((r) => ({ certificate: r.certificate, issuer: r.issuer, reason: r.reason, message: r.message }));
		if (ctx.options.json) ctx.out(JSON.stringify({ ...report, orders }, null, 2));
		else for (const line of renderPlan(report, styler(process.stdout.isTTY === true))) ctx.out(line);
		exitWith(cycleExitCode(cycleOutcome(report), "plan"));
	} finally {
		await engine.close();
	}
}

export async function syncCommand(ctx: CommandContext): Promise<void> {
	const { config } = ctx.loadConfig();
	// An operator's one-shot sync tries every endpoint, even one the daemon is backing off from.
	const engine = await buildEngine(config, { log: ctx.log, readOnly: false, backoff: false });
	const stop = new AbortController();
	const onSignal = () => stop.abort();
	process.once("SIGTERM", onSignal);
	process.once("SIGINT", onSignal);
	try {
		const report = await runCycle(engine.deps, "sync", stop.signal);
		engine.afterCycle?.(report);
		for (const line of auditLines(report)) ctx.log.info(line.fields, line.message);
		if (ctx.options.json) ctx.out(JSON.stringify(report, null, 2));
		else for (const line of renderPlan(report, styler(process.stdout.isTTY === true))) ctx.out(line);
		exitWith(cycleExitCode(cycleOutcome(report), "sync"));
	} finally {
		process.off("SIGTERM", onSignal);
		process.off("SIGINT", onSignal);
		await engine.close();
	}
}

function exitWith(code: number): void {
	if (code !== EXIT.ok) throw new ExitError(code);
}

export async function statusCommand(ctx: CommandContext, options: { endpoint?: string }): Promise<void> {
	const { config } = ctx.loadConfig();
	const engine = await buildEngine(config, { log: ctx.log, readOnly: true });
	const progress = ctx.options.json
		? createProgress(0, "")
		: createProgress(targetEndpoints(config.targets).length, "observing endpoints");
	try {
		const report = await runCycle(
			{ ...engine.deps, onEndpoint: () => progress.tick() },
			"plan",
			new AbortController().signal,
		);
		progress.done();
		const endpoints = report.targets.flatMap((t) => t.endpoints.map((e) => e.endpoint));
		if (options.endpoint !== undefined && !endpoints.includes(options.endpoint)) {
			throw new CertificateeError("CONFIG_INVALID", `no endpoint named "${options.endpoint}"`, {
				context: { field: "--endpoint" },
				hint: `endpoints: ${[...new Set(endpoints)].join(", ") || "none configured"}`,
			});
		}
		const cluster = await engine.readCluster?.();
		if (ctx.options.json) {
			ctx.out(JSON.stringify(statusDocument(report, engine.renewals(), cluster), null, 2));
			return;
		}
		const style = styler(process.stdout.isTTY === true);
		const lines = renderStatus(report, style, {
			now: new Date(),
			...(options.endpoint ? { endpoint: options.endpoint } : {}),
		});
		if (cluster) lines.push(...renderCluster(cluster, style));
		for (const line of lines) ctx.out(line);
	} finally {
		progress.done();
		await engine.close();
	}
}
