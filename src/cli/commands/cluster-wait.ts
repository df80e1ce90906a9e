/**
 * In a cluster an operator's request is recorded in etcd, the leader orders it and every member pushes it; the
 * command waits until it is served everywhere, looking as `status` does.
 */
import type { Config } from "../../config/schema.js";
import { CertificateeError } from "../../errors.js";
import type { CycleReport } from "../../reconcile/report.js";
import type { CommandContext } from "../context.js";

/** In a cluster the leader sees the request through its watch. */
export function clusterRecorded(ctx: CommandContext, name: string): void {
	ctx.log.info(
		{ certificate: name },
		"request recorded in etcd: the leader orders it within seconds and every member pushes it",
	);
}

/**
 * In a cluster: waits (within `wait`) until a serial other than `before` is issued for the certificate and every
 * endpoint that carries it serves it, looking as `status` does (a read-only cycle: etcd's state, every endpoint
 * observed and probed), then prints it as a running daemon's answer is printed. Not served within `wait`:
 * NOT_AVAILABLE, saying where it stands (the members carry on).
 */
export async function waitClusterServed(ctx: CommandContext, config: Config, ask: ClusterAsk): Promise<void> {
	const { buildEngine } = await import("../../daemon/engine.js");
	const { runCycle } = await import("../../reconcile/cycle.js");
	const { certificateOnEndpoint } = await import("../../reconcile/convergence.js");
	const deadline = ask.requestedAt.getTime() + ask.wait;
	const engine = await buildEngine(config, { log: ctx.log, readOnly: true });
	let where = "not issued yet";
	try {
		for (;;) {
			const report = await runCycle(
				engine.deps,
				"plan",
				AbortSignal.timeout(Math.max(1000, deadline - Date.now())),
			);
			const serial = report.certificates.find((c) => c.name === ask.certificate)?.serial;
			if (serial !== undefined && serial !== ask.before) {
				const endpoints = carriers(report, ask.certificate, certificateOnEndpoint);
				const behind = endpoints.filter((e) => !e.on.converged);
				if (behind.length === 0) return printClusterServed(ctx, ask, serial, endpoints);
				where = `serial ${serial} issued, served on ${endpoints.length - behind.length}/${endpoints.length} endpoints: ${behind.map((e) => `${e.endpoint}: ${e.on.reason ?? "not converged"}`).join("; ")}`;
			}
			if (Date.now() >= deadline) break;
			await new Promise((done) => setTimeout(done, Math.min(1000, Math.max(0, deadline - Date.now()))));
		}
	} finally {
		await engine.close();
	}
	throw new CertificateeError(
		"NOT_AVAILABLE",
		`the ${ask.kind} request for "${ask.certificate}" is recorded in etcd but not served everywhere within --wait (${Math.round(ask.wait / 1000)} s): ${where}`,
		{
			context: { certificate: ask.certificate, operation: ask.kind },
			hint: "the members carry on: certificatee status shows when the new certificate is served; check that a leader is elected (status, CLUSTER)",
		},
	);
}

interface ClusterAsk {
	certificate: string;
	kind: string;
	/** The serial issued before the request, if any: the wait is for another one. */
	before: string | undefined;
	requestedAt: Date;
	wait: number;
}

type OnEndpoint = (
	e: CycleReport["targets"][number]["endpoints"][number],
	certificate: string,
) => { converged: boolean; reason?: string } | undefined;

/** The endpoints that carry the certificate, with where it stands on each. */
function carriers(report: CycleReport, certificate: string, onEndpoint: OnEndpoint) {
	return report.targets.flatMap((t) =>
		t.endpoints.flatMap((e) => {
			const on = onEndpoint(e, certificate);
			return on ? [{ target: t.target, endpoint: e.endpoint, on }] : [];
		}),
	);
}

/** Served everywhere: printed as a running daemon's answer is. */
function printClusterServed(
	ctx: CommandContext,
	ask: ClusterAsk,
	serial: string,
	endpoints: ReadonlyArray<{ target: string; endpoint: string }>,
): void {
	const at = new Date().toISOString();
	if (ctx.options.json) {
		const served = endpoints.map((e) => ({ target: e.target, endpoint: e.endpoint, converged: true }));
		ctx.out(
			JSON.stringify({ certificate: ask.certificate, serial, servedAt: at, endpoints: served }, null, 2),
		);
		return;
	}
	ctx.out(`${ask.certificate}: serial ${serial} served at ${at}`);
	ctx.out(`  requested ${ask.requestedAt.toISOString()} (recorded in etcd)`);
	for (const e of endpoints)
		ctx.out(`  ${e.endpoint === e.target ? e.target : `${e.target} ${e.endpoint}`}: served`);
}
