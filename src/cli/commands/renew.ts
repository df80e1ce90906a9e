/**
 * `certificatee renew NAME [--force]` and `certificatee revoke NAME [--reason R]`: an operator's order, recorded
 * in the certificate's renewal state (so the request and its count survive the process), then one sync cycle
 * that orders it and pushes the result to every target.
 */
import { watch as fsWatch } from "node:fs";
import { parseDuration } from "../../base/duration.js";
import type { Config } from "../../config/schema.js";
import { openClusterReader } from "../../daemon/cluster.js";
import { CertificateeError, ERROR_CODES, type ErrorCode, isCertificateeError } from "../../errors.js";
import { requestRenewal, revokeLatest } from "../../renewal/request.js";
import type { CertificateSpec } from "../../renewal/schema.js";
import { createDirectorySource } from "../../sources/directory/index.js";
import { buildSources } from "../../sources/registry.js";
import { REVOCATION_REASONS, type RevocationReason } from "../../sources/types.js";
import { type FileStore, openFileStore } from "../../store/file-store.js";
import { stateLockOwner } from "../../store/lock.js";
import { readCertificateRecord } from "../../store/records.js";
import {
	announcedDaemon,
	isWaiting,
	type OperatorRequest,
	type RequestAnswer,
	readAnswer,
	requestsDir,
	submitRequest,
	withdrawRequest,
} from "../../store/requests.js";
import type { StateStore } from "../../store/types.js";
import type { CommandContext } from "../context.js";
import { syncCommand } from "./cycle.js";

/** How long `renew`/`revoke` wait for a running daemon to serve the request, unless `--wait` says otherwise. */
export const DEFAULT_WAIT = "10m";

/**
 * The certificate spec, or CONFIG_INVALID: for a name a directory source serves, saying that certificatee
 * serves that file and does not order it.
 */
async function certificateNamed(config: Config, name: string): Promise<CertificateSpec> {
	const spec = config.certificates.find((c) => c.name === name);
	if (spec) return spec;
	for (const source of config.sources) {
		if (source.type !== "directory") continue;
		const found = (await createDirectorySource(source).load(new AbortController().signal)).certificates.find(
			(c) => c.name === name,
		);
		if (found) {
			throw new CertificateeError(
				"CONFIG_INVALID",
				`"${name}" comes from the directory source "${source.name}" (${found.origin.replace(/^source [^:]*: /, "")}): certificatee serves that file as it is and does not order it`,
				{
					context: { field: "certificates", certificate: name },
					hint: `put the renewed certificate in its place (the daemon picks it up within the source's debounce), or manage it under certificates: with an issuer`,
				},
			);
		}
	}
	throw new CertificateeError("CONFIG_INVALID", `no certificate named "${name}"`, {
		context: { field: "certificates", certificate: name },
		hint: `configured certificates: ${config.certificates.map((c) => c.name).join(", ") || "none"}`,
	});
}

function maxOrders(config: Config): { maxOrdersPerDay?: number } {
	const limit = config.renewal?.max_orders_per_day;
	return limit === undefined ? {} : { maxOrdersPerDay: limit };
}

export async function renewCommand(
	ctx: CommandContext,
	name: string,
	options: { force?: boolean; wait?: string },
): Promise<void> {
	const { config } = ctx.loadConfig();
	await certificateNamed(config, name);
	const force = options.force === true;
	const wait = waitMs(options.wait);
	if (config.cluster) {
		const reader = openClusterReader(config.cluster);
		const requestedAt = new Date();
		let before: string | undefined;
		try {
			before = (await readCertificateRecord(reader.store, name))?.value.history[0]?.serial;
			await requestRenewal(reader.store, name, { force, now: requestedAt, ...maxOrders(config) });
		} finally {
			await reader.close();
		}
		logRequested(ctx, name, force);
		clusterRecorded(ctx, name);
		return waitClusterServed(ctx, config, { certificate: name, kind: "renew", before, requestedAt, wait });
	}
	const local = await openLocalOrDaemon(config);
	if ("daemon" in local)
		return askDaemon(ctx, config, local.daemon, { kind: "renew", certificate: name, force }, wait);
	try {
		await requestRenewal(local.store, name, { force, now: new Date(), ...maxOrders(config) });
	} finally {
		local.store.close();
	}
	logRequested(ctx, name, force);
	return syncCommand(ctx);
}

function logRequested(ctx: CommandContext, name: string, force: boolean): void {
	ctx.log.info(
		{ certificate: name, force },
		force
			? "renewal forced by an operator: backoff and daily cap cleared"
			: "renewal requested by an operator",
	);
}

export function waitMs(text: string | undefined): number {
	const ms = parseDuration(text ?? DEFAULT_WAIT);
	if (ms === undefined || ms <= 0) {
		throw new CertificateeError("CONFIG_INVALID", `--wait ${text}: not a duration`, {
			context: { field: "--wait" },
			hint: "e.g. --wait 90s, --wait 15m",
		});
	}
	return ms;
}

/**
 * The state directory's store with its lock, or the pid of the running daemon that holds the lock and serves
 * requests. Another holder (a `sync --once` in progress) is STATE_LOCKED as before.
 */
export async function openLocalOrDaemon(config: Config): Promise<{ store: FileStore } | { daemon: number }> {
	try {
		return { store: await openFileStore(config.state_dir) };
	} catch (e) {
		if (!isCertificateeError(e, "STATE_LOCKED")) throw e;
		const owner = stateLockOwner(config.state_dir);
		const daemon = await announcedDaemon(config.state_dir);
		if (owner === undefined || daemon !== owner) throw e;
		return { daemon };
	}
}

/** In a cluster the leader sees the request through its watch. */
function clusterRecorded(ctx: CommandContext, name: string): void {
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
async function waitClusterServed(
	ctx: CommandContext,
	config: Config,
	ask: { certificate: string; kind: string; before: string | undefined; requestedAt: Date; wait: number },
): Promise<void> {
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
				const endpoints = report.targets.flatMap((t) =>
					t.endpoints.flatMap((e) => {
						const on = certificateOnEndpoint(e, ask.certificate);
						return on ? [{ target: t.target, endpoint: e.endpoint, on }] : [];
					}),
				);
				const behind = endpoints.filter((e) => !e.on.converged);
				if (behind.length === 0) {
					const at = new Date().toISOString();
					if (ctx.options.json)
						ctx.out(
							JSON.stringify(
								{
									certificate: ask.certificate,
									serial,
									servedAt: at,
									endpoints: endpoints.map((e) => ({
										target: e.target,
										endpoint: e.endpoint,
										converged: true,
									})),
								},
								null,
								2,
							),
						);
					else {
						ctx.out(`${ask.certificate}: serial ${serial} served at ${at}`);
						ctx.out(`  requested ${ask.requestedAt.toISOString()} (recorded in etcd)`);
						for (const e of endpoints)
							ctx.out(`  ${e.endpoint === e.target ? e.target : `${e.target} ${e.endpoint}`}: served`);
					}
					return;
				}
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

/**
 * Leaves the request for the running daemon and waits for its answer: `taken` (logged), then `served` (printed,
 * exit 0) or `failed` (its error, exit 1). Not taken within `wait`: withdrawn, NOT_AVAILABLE.
 */
export async function askDaemon(
	ctx: CommandContext,
	config: Config,
	pid: number,
	ask: Pick<OperatorRequest, "kind" | "certificate" | "force" | "replacement"> & { reason?: string },
	wait: number,
): Promise<void> {
	const stateDir = config.state_dir;
	const requestedAt = new Date();
	const request = await submitRequest(stateDir, {
		...ask,
		requestedAt: requestedAt.toISOString(),
		expiresAt: new Date(requestedAt.getTime() + wait).toISOString(),
	});
	ctx.log.info(
		{ certificate: ask.certificate, request: request.id, daemon: pid },
		`${ask.kind} request left for the running daemon (pid ${pid})`,
	);
	let taken: RequestAnswer | undefined;
	const final = await waitForAnswer(stateDir, request.id, wait, (a) => {
		if (a.state !== "taken" || taken) return;
		taken = a;
		ctx.log.info(
			{ certificate: ask.certificate, takenAt: a.takenAt },
			ask.kind === "replace"
				? "request taken by the daemon: replacement recorded, pushing it now"
				: "request taken by the daemon: ordering now",
		);
	});
	if (!final) {
		if (await isWaiting(stateDir, request.id)) {
			await withdrawRequest(stateDir, request.id);
			throw new CertificateeError(
				"NOT_AVAILABLE",
				`the daemon (pid ${pid}) did not take the ${ask.kind} request for "${ask.certificate}" within --wait (${Math.round(wait / 1000)} s); request withdrawn`,
				{
					context: { certificate: ask.certificate, operation: ask.kind },
					hint: "it takes requests between cycles: a long cycle delays it; retry with a longer --wait, or see certificatee status",
				},
			);
		}
		throw new CertificateeError(
			"NOT_AVAILABLE",
			`the daemon took the ${ask.kind} request for "${ask.certificate}"${taken ? ` at ${taken.takenAt}` : ""} but its cycle did not finish within ${Math.round(wait / 1000)} s`,
			{
				context: { certificate: ask.certificate, operation: ask.kind },
				hint: "it carries on: certificatee status shows when the new certificate is served",
			},
		);
	}
	await withdrawRequest(stateDir, request.id);
	if (ctx.options.json) ctx.out(JSON.stringify({ request, answer: final }, null, 2));
	if (final.state === "failed") {
		throw new CertificateeError(
			codeOf(final.error?.code),
			`${ask.kind} "${ask.certificate}" (taken by the daemon at ${final.takenAt}): ${final.message}`,
			{
				context: { certificate: ask.certificate, operation: ask.kind },
				...(final.error?.hint ? { hint: final.error.hint } : {}),
			},
		);
	}
	if (ctx.options.json) return;
	ctx.out(`${ask.certificate}: serial ${final.serial ?? "?"} served at ${final.at}`);
	ctx.out(`  requested ${request.requestedAt}, taken by the daemon (pid ${final.pid}) at ${final.takenAt}`);
	for (const e of final.endpoints ?? []) {
		const where = e.endpoint === e.target ? e.target : `${e.target} ${e.endpoint}`;
		ctx.out(`  ${where}: ${e.converged ? "served" : e.reason}`);
	}
}

function codeOf(code: string | undefined): ErrorCode {
	return (ERROR_CODES as readonly string[]).includes(code ?? "") ? (code as ErrorCode) : "ISSUE_FAILED";
}

/** The final answer (served or failed), or undefined when `wait` passed first; `seen` hears each answer read. */
async function waitForAnswer(
	stateDir: string,
	id: string,
	wait: number,
	seen: (a: RequestAnswer) => void,
): Promise<RequestAnswer | undefined> {
	const deadline = Date.now() + wait;
	return new Promise((resolve) => {
		let done = false;
		let checking = false;
		let again = false;
		const finish = (a: RequestAnswer | undefined) => {
			if (done) return;
			done = true;
			watcher?.close();
			clearInterval(poll);
			clearTimeout(timer);
			resolve(a);
		};
		const check = async () => {
			if (checking) {
				again = true;
				return;
			}
			checking = true;
			do {
				again = false;
				const a = await readAnswer(stateDir, id);
				if (a) seen(a);
				if (a && a.state !== "taken") return finish(a);
			} while (again && !done);
			checking = false;
		};
		let watcher: ReturnType<typeof fsWatch> | undefined;
		try {
			watcher = fsWatch(requestsDir(stateDir), { persistent: false }, () => void check());
			watcher.on("error", () => undefined);
		} catch {
			watcher = undefined;
		}
		// Behind the watch, in case the filesystem does not report changes (a network mount).
		const poll = setInterval(() => void check(), 1000);
		const timer = setTimeout(() => finish(undefined), Math.max(0, deadline - Date.now()));
		void check();
	});
}

export function parseRevocationReason(text: string): RevocationReason {
	if (text in REVOCATION_REASONS) return text as RevocationReason;
	throw new CertificateeError("CONFIG_INVALID", `unknown revocation reason "${text}"`, {
		context: { field: "--reason" },
		hint: `one of: ${Object.keys(REVOCATION_REASONS).join(", ")}`,
	});
}

export async function revokeCommand(
	ctx: CommandContext,
	name: string,
	options: { reason?: string; wait?: string },
): Promise<void> {
	const { config } = ctx.loadConfig();
	await certificateNamed(config, name);
	const reason = parseRevocationReason(options.reason ?? "unspecified");
	const wait = waitMs(options.wait);
	let shared: { store: StateStore; close(): Promise<void> };
	if (config.cluster) {
		const reader = openClusterReader(config.cluster);
		shared = { store: reader.store, close: () => reader.close() };
	} else {
		const local = await openLocalOrDaemon(config);
		if ("daemon" in local) {
			return askDaemon(
				ctx,
				config,
				local.daemon,
				{ kind: "revoke", certificate: name, force: true, reason },
				wait,
			);
		}
		shared = { store: local.store, close: async () => local.store.close() };
	}
	const store = shared.store;
	const requestedAt = new Date();
	let before: string | undefined;
	try {
		before = (await readCertificateRecord(store, name))?.value.history[0]?.serial;
		const built = await buildSources(config.sources, { store });
		try {
			const revoked = await revokeLatest(store, built.issuers, name, reason, AbortSignal.timeout(120_000));
			ctx.log.info({ certificate: name, ...revoked, reason }, "certificate revoked");
		} finally {
			await built.close();
		}
		await requestRenewal(store, name, { force: true, now: new Date(), ...maxOrders(config) });
	} finally {
		await shared.close();
	}
	if (config.cluster) {
		clusterRecorded(ctx, name);
		return waitClusterServed(ctx, config, { certificate: name, kind: "revoke", before, requestedAt, wait });
	}
	return syncCommand(ctx);
}
